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
