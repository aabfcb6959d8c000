import Foundation
import Testing

/// A private `redis-server` on a Unix socket in a temporary folder, with
/// the append-only file on and fsynced at every write (what the stage's
/// exactly-once promise needs), stopped by its pid.
public final class RedisServer: @unchecked Sendable {
  public let directory: String
  public var socket: String { directory + "/redis.sock" }
  public var url: String { "unix://" + socket }
  /// The server's `requirepass`, which `cli` gives too.
  public let password: String?
  private var process: Process?

  public init(password: String? = nil) {
    directory = makeTemporaryDirectory("fanout-redis")
    self.password = password
    start()
  }

  /// Starts the server (again: it reloads its append-only file).
  public func start() {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/redis-server")
    process.arguments =
      [
        "--port", "0", "--unixsocket", socket, "--dir", directory, "--save", "",
        "--appendonly", "yes", "--appendfsync", "always", "--logfile", directory + "/redis.log",
      ] + (password.map { ["--requirepass", $0] } ?? [])
    // Not the test's own output: a server outliving a crashed test run would
    // hold that pipe open and `swift test` would wait for it forever.
    process.standardInput = FileHandle.nullDevice
    process.standardOutput = FileHandle.nullDevice
    process.standardError = FileHandle.nullDevice
    do { try process.run() } catch {
      Issue.record("cannot start redis-server: \(error)")
      return
    }
    self.process = process
    let deadline = Date().addingTimeInterval(30)
    while Date() < deadline {
      if cli(["PING"]).text == "PONG\n" { return }
      usleep(20_000)
    }
    // A failed test, not a crashed run (which would take every other test with it).
    Issue.record("redis-server did not start in 30 s: \(readText(directory + "/redis.log"))")
  }

  /// Kills the server with `signal` (SIGKILL: a crash) and waits for it.
  public func stop(signal: Int32 = SIGTERM) {
    guard let process else { return }
    kill(process.processIdentifier, signal)
    process.waitUntilExit()
    self.process = nil
  }

  /// `redis-cli` against this server.
  @discardableResult
  public func cli(_ arguments: [String], input: [UInt8]? = nil) -> ProcessResult {
    let auth = password.map { ["-a", $0, "--no-auth-warning"] } ?? []
    return runProcess("/usr/bin/redis-cli", ["-s", socket] + auth + arguments, input: input)
  }

  /// Appends one entry per line to `stream`, field `message` (pipelined).
  public func feed(_ stream: String, lines: [String]) {
    var resp: [UInt8] = []
    func bulk(_ s: [UInt8]) { resp += Array("$\(s.count)\r\n".utf8) + s + Array("\r\n".utf8) }
    for line in lines {
      resp += Array("*5\r\n".utf8)
      for part in ["XADD", stream, "*", "message"] { bulk(Array(part.utf8)) }
      bulk(Array(line.utf8))
    }
    let r = cli(["--pipe"], input: resp)
    if r.status != 0 { Issue.record("redis-cli --pipe: \(r.stderr)") }
  }

  /// A stream's entries as field → value maps with their `id`, in order
  /// (`--json`: values may hold any byte, and an error reply cannot be
  /// mistaken for entries).
  public func entries(_ stream: String) -> [[String: String]] {
    let reply = cli(["--json", "XRANGE", stream, "-", "+"])
    guard reply.status == 0,
      let decoded = try? JSONSerialization.jsonObject(with: Data(reply.stdout)) as? [[Any]]
    else {
      Issue.record("XRANGE \(stream): \(reply.text) \(reply.stderr)")
      return []
    }
    return decoded.compactMap { pair in
      guard pair.count == 2, let id = pair[0] as? String, let fields = pair[1] as? [String] else {
        Issue.record("XRANGE \(stream): an entry of another shape: \(pair)")
        return nil
      }
      var entry = ["id": id]
      for f in stride(from: 0, to: fields.count - 1, by: 2) { entry[fields[f]] = fields[f + 1] }
      return entry
    }
  }

  /// `XINFO GROUPS`' pending and lag of `group`, or nil without it.
  public func progress(_ stream: String, group: String) -> (pending: Int, lag: Int)? {
    let lines = cli(["--raw", "XINFO", "GROUPS", stream]).text.split(separator: "\n").map(
      String.init)
    guard let at = lines.firstIndex(of: "name"), at + 1 < lines.count, lines[at + 1] == group
    else { return nil }
    func value(_ key: String) -> Int? {
      lines.firstIndex(of: key).flatMap { Int(lines[$0 + 1]) }
    }
    return (value("pending") ?? -1, value("lag") ?? -1)
  }

  deinit {
    stop(signal: SIGKILL)
    try? FileManager.default.removeItem(atPath: directory)
  }
}
