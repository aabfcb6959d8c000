import Foundation
import Testing

/// The result of running a program to completion.
public struct ProcessResult {
  public let status: Int32
  public let stdout: [UInt8]
  public let stderr: String
  public var text: String { String(decoding: stdout, as: UTF8.self) }
}

/// Runs `executable` with `arguments`, feeding `input` on standard input.
/// Streams go through files, so no pipe can fill up and stall the child.
public func runProcess(
  _ executable: String, _ arguments: [String], input: [UInt8]? = nil,
  environment: [String: String] = [:]
) -> ProcessResult {
  let dir = makeTemporaryDirectory("fanout-process")
  let paths = (stdin: dir + "/stdin", stdout: dir + "/stdout", stderr: dir + "/stderr")
  _ = FileManager.default.createFile(atPath: paths.stdin, contents: Data(input ?? []))
  _ = FileManager.default.createFile(atPath: paths.stdout, contents: nil)
  _ = FileManager.default.createFile(atPath: paths.stderr, contents: nil)
  let process = Process()
  process.executableURL = URL(fileURLWithPath: executable)
  process.arguments = arguments
  process.environment = childEnvironment(environment)
  process.standardInput = FileHandle(forReadingAtPath: paths.stdin)
  process.standardOutput = FileHandle(forWritingAtPath: paths.stdout)
  process.standardError = FileHandle(forWritingAtPath: paths.stderr)
  defer { try? FileManager.default.removeItem(atPath: dir) }
  do { try process.run() } catch {
    // What a shell says of a program it cannot start; the caller's checks fail on it.
    return ProcessResult(status: 127, stdout: [], stderr: "cannot run \(executable): \(error)")
  }
  process.waitUntilExit()
  return ProcessResult(
    status: process.terminationStatus,
    stdout: Array(FileManager.default.contents(atPath: paths.stdout) ?? Data()),
    stderr: readText(paths.stderr))
}

/// The built `fanout` executable, next to the test bundle.
public let fanoutExecutable: String = {
  let bundleDir = Bundle.main.bundleURL.deletingLastPathComponent()
  for dir in [bundleDir, Bundle.main.bundleURL, packageRoot.appendingPathComponent(".build/debug")]
  {
    let candidate = dir.appendingPathComponent("fanout").path
    if FileManager.default.isExecutableFile(atPath: candidate) { return candidate }
  }
  fatalError("fanout executable not found next to \(bundleDir.path); run `swift build` first")
}()

/// Decodes an LZ4 file with the `lz4` command-line tool.
public func lz4CommandLineDecode(_ path: String) -> String? {
  let result = runProcess("/usr/bin/lz4", ["-dc", path])
  return result.status == 0 ? result.text : nil
}

/// The newline-terminated lines of `bytes`: a file another process is
/// still writing may end inside a line (a reader can see part of a write).
public func completeLines(_ bytes: [UInt8]) -> [Substring] {
  guard let lastNewline = bytes.lastIndex(of: 0x0A) else { return [] }
  return String(decoding: bytes[...lastNewline], as: UTF8.self).split(separator: "\n")
}

/// A JSON object line, decoded; a line that is not one fails the test
/// (rather than trapping, which would end every test of the run).
public func decodeRecord(_ line: Substring) -> [String: Any]? {
  guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
  else {
    Issue.record("not a JSON object: \(line.prefix(300))")
    return nil
  }
  return object
}

/// A child started as a shell starts one: no signal blocked or ignored (a
/// child of `Process` inherits the mask of the Dispatch thread that starts
/// it, which blocks nearly every signal, and would hide what a signal does
/// to the program itself).
public struct PlainChild {
  public let pid: pid_t
  /// The write end of the child's standard input, when it was given a pipe.
  public let input: Int32?

  /// Starts `executable` with `arguments`, standard output to /dev/null,
  /// standard error to the file `stderr`; standard input a pipe held open
  /// by the caller (`keepInputOpen`) or /dev/null.
  public init?(
    _ executable: String, _ arguments: [String], stderr: String, keepInputOpen: Bool = false,
    environment: [String: String] = [:]
  ) {
    var attributes = posix_spawnattr_t()
    posix_spawnattr_init(&attributes)
    defer { posix_spawnattr_destroy(&attributes) }
    var none = sigset_t()
    sigemptyset(&none)
    posix_spawnattr_setsigmask(&attributes, &none)
    var defaults = sigset_t()
    sigemptyset(&defaults)
    for number in [SIGINT, SIGTERM, SIGHUP, SIGPIPE] { sigaddset(&defaults, number) }
    posix_spawnattr_setsigdefault(&attributes, &defaults)
    posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    var pipeEnds: [Int32] = [-1, -1]
    if keepInputOpen {
      guard pipe(&pipeEnds) == 0 else { return nil }
      // Neither end may stay open in the child but as its standard input.
      for end in pipeEnds { _ = fcntl(end, F_SETFD, FD_CLOEXEC) }
      posix_spawn_file_actions_adddup2(&actions, pipeEnds[0], 0)
    } else {
      posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
    }
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
    posix_spawn_file_actions_addopen(&actions, 2, stderr, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
    let environment = childEnvironment(environment).map { "\($0.key)=\($0.value)" }
    var argv: [UnsafeMutablePointer<CChar>?] = ([executable] + arguments).map { strdup($0) } + [nil]
    var envp: [UnsafeMutablePointer<CChar>?] = environment.map { strdup($0) } + [nil]
    defer { for p in argv + envp { free(p) } }
    var pid: pid_t = 0
    let code = posix_spawn(&pid, executable, &actions, &attributes, &argv, &envp)
    if keepInputOpen { close(pipeEnds[0]) }
    guard code == 0 else {
      if keepInputOpen { close(pipeEnds[1]) }
      return nil
    }
    self.pid = pid
    input = keepInputOpen ? pipeEnds[1] : nil
  }

  /// Waits for the child's end: its exit status, or minus the signal that ended it.
  public func wait() -> Int32 {
    var status: Int32 = 0
    while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
    if let input { close(input) }
    let signal = status & 0x7F
    return signal == 0 ? (status >> 8) & 0xFF : -signal
  }
}

/// Whether process `pid` has blocked SIGINT, SIGTERM and SIGHUP — the first
/// thing `fanout`'s `main` does (`TerminationSignals.blockAtStart`). Before
/// that, in the dynamic loader's work, a signal's default action ends the
/// process: docs/contract.md says no program can cover that instant.
public func blocksTerminationSignals(_ pid: pid_t) -> Bool {
  guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
    let line = status.split(separator: "\n").first(where: { $0.hasPrefix("SigBlk:") }),
    let mask = UInt64(
      line.dropFirst("SigBlk:".count).trimmingCharacters(in: .whitespaces), radix: 16)
  else { return false }
  return [SIGINT, SIGTERM, SIGHUP].allSatisfy { mask & (1 << UInt64($0 - 1)) != 0 }
}

/// Waits (up to `seconds`) until process `pid` blocks the termination
/// signals; false if it never did (it ended first, say).
@discardableResult
public func waitUntilSignalsBlocked(_ pid: pid_t, seconds: Double = 30) -> Bool {
  let deadline = Date().addingTimeInterval(seconds)
  while !blocksTerminationSignals(pid) {
    guard Date() < deadline else { return false }
    usleep(1_000)
  }
  return true
}
