import Foundation
import Synchronization
import Testing

/// A running `fanout stream`, driven as a pipeline would drive it: lines
/// written to its standard input, signals sent, its standard output and
/// standard error read from files as they grow. (`@unchecked Sendable`: a
/// test writes from one thread while it reads the output files from another;
/// nothing else is shared.)
public final class StreamProcess: @unchecked Sendable {
  public let directory: String
  private let process = Process()
  private let input = Pipe()
  private let inputState = Mutex(true)  // whether the input is open
  /// False when the stage could not be started (the test has failed then).
  private var launched = false

  /// Starts `fanout stream` with `arguments` (and `environment` added to
  /// this process's); with `openFileLimit`, under that `ulimit -n` (through
  /// the shell, which then becomes the stage).
  public init(
    _ arguments: [String], openFileLimit: Int? = nil, environment: [String: String] = [:]
  ) {
    // Writing to a stage that has stopped reading must fail, not kill the test.
    signal(SIGPIPE, SIG_IGN)
    directory = makeTemporaryDirectory("fanout-stream")
    _ = FileManager.default.createFile(atPath: directory + "/stdout", contents: nil)
    _ = FileManager.default.createFile(atPath: directory + "/stderr", contents: nil)
    if let openFileLimit {
      process.executableURL = URL(fileURLWithPath: "/bin/sh")
      process.arguments =
        ["-c", "ulimit -n \(openFileLimit) && exec \"$0\" \"$@\"", fanoutExecutable, "stream"]
        + arguments
    } else {
      process.executableURL = URL(fileURLWithPath: fanoutExecutable)
      process.arguments = ["stream"] + arguments
    }
    process.environment = childEnvironment(environment)
    process.standardInput = input
    process.standardOutput = FileHandle(forWritingAtPath: directory + "/stdout")
    process.standardError = FileHandle(forWritingAtPath: directory + "/stderr")
    do {
      try process.run()
      launched = true
    } catch {
      Issue.record("cannot start fanout stream: \(error)")
    }
  }

  public var pid: Int32 { process.processIdentifier }

  /// Writes bytes to the stage's standard input; false once it no longer
  /// reads or the input is closed. The write goes to a duplicate of the
  /// pipe's descriptor: a writer thread still running when `closeInput()`
  /// closes the pipe must not write into whatever file reuses the number.
  @discardableResult
  public func write(_ bytes: [UInt8]) -> Bool {
    let fd = inputState.withLock { open in
      open ? dup(input.fileHandleForWriting.fileDescriptor) : -1
    }
    guard fd >= 0 else { return false }
    defer { close(fd) }
    var done = 0
    while done < bytes.count {
      let n = bytes.withUnsafeBytes {
        Foundation.write(fd, $0.baseAddress! + done, $0.count - done)
      }
      if n < 0 {
        if errno == EINTR { continue }
        return false
      }
      done += n
    }
    return true
  }

  public func write(lines: some Sequence<String>) {
    write(Array(lines.map { $0 + "\n" }.joined().utf8))
  }

  public func closeInput() {
    inputState.withLock { open in
      guard open else { return }
      open = false
      try? input.fileHandleForWriting.close()
    }
  }

  public func send(_ signal: Int32) {
    // (Not started, its pid is 0, which `kill` takes for this process's group.)
    if launched { kill(process.processIdentifier, signal) }
  }

  public var stdout: [UInt8] {
    Array(FileManager.default.contents(atPath: directory + "/stdout") ?? Data())
  }
  public var stderr: String { readText(directory + "/stderr") }

  /// Waits until `condition` holds, polling; false after `seconds`.
  @discardableResult
  public func wait(seconds: Double = 60, until condition: () -> Bool) -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
      if condition() { return true }
      usleep(20_000)
    }
    return condition()
  }

  /// Waits for the process to exit; its status.
  public func waitForExit() -> Int32 {
    closeInput()
    guard launched else { return -1 }
    process.waitUntilExit()
    return process.terminationStatus
  }

  /// The `{"batch":…}` lines of standard output (with `--out -`), decoded.
  /// Read while the stage runs, the output may end inside a batch's write:
  /// only whole lines count.
  public var batchRecords: [[String: Any]] {
    completeLines(stdout).compactMap { line in
      guard line.hasPrefix(#"{"batch":"#) else { return nil }
      return decodeRecord(line)
    }
  }

  deinit {
    if launched && process.isRunning {
      process.terminate()
      process.waitUntilExit()
    }
    try? FileManager.default.removeItem(atPath: directory)
  }
}
