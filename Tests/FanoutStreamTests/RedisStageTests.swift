import FanoutTestSupport
import Foundation
import Testing

/// `fanout stream --redis` against a real `redis-server` each test starts
/// on its own socket: every line through the stage equals `fanout eval`'s
/// deliveries, whatever crashes in between.
@Suite("fanout stream --redis", .serialized)
struct RedisStageTests {
  /// Generated chat data (no throttle: a restarted stage starts its throttle
  /// afresh, docs/stream.md) and eval's output on it.
  final class World: @unchecked Sendable {
    let snapshot: String
    let lines: [String]
    let eval: String

    init(
      users: Int, messages: Int, seed: Int, extraLines: [String] = [], genFlags: [String] = []
    ) {
      let dir = makeTemporaryDirectory("fanout-redis-world")
      let gen = runProcess(
        fanoutExecutable,
        [
          "gen", "--users", "\(users)", "--messages", "\(messages)", "--seed", "\(seed)", "--out",
          dir,
        ] + genFlags)
      precondition(gen.status == 0, gen.stderr)
      snapshot = dir + "/snapshot.sqlite"
      lines = readText(dir + "/traffic.ndjson").split(separator: "\n").map(String.init) + extraLines
      try! Data((lines.joined(separator: "\n") + "\n").utf8).write(
        to: URL(fileURLWithPath: dir + "/all.ndjson"))
      eval = dir + "/eval"
      let r = runProcess(
        fanoutExecutable,
        ["eval", "--snapshot", snapshot, "--messages", dir + "/all.ndjson", "--out", eval])
      precondition(r.status == 0, r.stderr)
    }

    /// eval's delivery lines per gateway, in order.
    var deliveries: [String: [String]] {
      var result: [String: [String]] = [:]
      for name in listDirectory(eval) where name.hasSuffix(".ndjson.lz4") {
        let gateway = String(name.dropLast(".ndjson.lz4".count))
        result[gateway] = lz4CommandLineDecode(eval + "/" + name)!.split(separator: "\n").map(
          String.init)
      }
      return result
    }

    var summary: [String: Any] {
      try! JSONSerialization.jsonObject(
        with: Data(contentsOf: URL(fileURLWithPath: eval + "/summary.json"))) as! [String: Any]
    }

    var rejected: Int { summary["rejected"] as! Int }
  }

  static let small = World(
    users: 2000, messages: 3000, seed: 21,
    extraLines: [
      "not json", #"{"id":"x"}"#, "\u{1}\u{2}junk\u{7f}", #"{"id":"m","channel":"nope","ts":1}"#,
    ])
  static let large = World(users: 20000, messages: 50000, seed: 22)

  /// The stage on `server`'s stream `in`, group `g`; without `consumer`,
  /// under its default name.
  func stage(_ server: RedisServer, _ world: World, consumer: String?, extra: [String] = [])
    -> StreamProcess
  {
    StreamProcess(
      [
        "--snapshot", world.snapshot, "--redis", server.url, "--input", "in", "--group", "g",
        "--from-start", "--batch-messages", "500", "--batch-ms", "20", "--status-seconds", "60",
        "--threads", "2",
      ] + (consumer.map { ["--consumer", $0] } ?? []) + extra)
  }

  /// A server whose stream `in` holds `world`'s lines.
  func fedServer(_ world: World) -> RedisServer {
    let server = RedisServer()
    server.feed("in", lines: world.lines)
    return server
  }

  /// The output streams hold eval's delivery lines for `world` (in eval's
  /// order, or per gateway as multisets when claims reorder them), and the
  /// batch records account for every input line.
  func expectEvalOutput(_ server: RedisServer, _ world: World, inOrder: Bool) {
    var expected = world.deliveries
    let updates = expected.removeValue(forKey: "updates")
    let got = outputLines(server, expected.keys)
    if inOrder {
      #expect(got == expected)
    } else {
      #expect(got.mapValues { $0.sorted() } == expected.mapValues { $0.sorted() })
    }
    if let updates {
      // Contract v3's update lines: `line` is the batch's own numbering on
      // Redis, so each is compared from its id on.
      func body(_ line: String) -> Substring { line.drop { $0 != "," } }
      let written = server.entries("fanout:updates").map { body($0["update"]!) }
      let wanted = updates.map { body($0) }
      #expect(inOrder ? written == wanted : written.sorted() == wanted.sorted())
    }
    #expect(linesDone(server) == world.lines.count)
  }

  /// Waits for the stage to read and acknowledge all of `world`'s lines,
  /// stops it, and compares its output with eval's.
  func finishAsEval(
    _ process: StreamProcess, _ server: RedisServer, _ world: World, inOrder: Bool
  ) {
    waitUntilDone(server, entries: world.lines.count, process)
    stop(process)
    expectEvalOutput(server, world, inOrder: inOrder)
  }

  /// Stops the stage as a supervisor would: SIGTERM, then a clean exit.
  func stop(_ process: StreamProcess) {
    process.send(SIGTERM)
    #expect(process.waitForExit() == 0, "\(process.stderr)")
  }

  /// The input lines the batch records account for.
  func linesDone(_ server: RedisServer) -> Int {
    server.entries("fanout:batches").reduce(0) { total, entry in
      guard let text = entry["batch"],
        let record = try? JSONSerialization.jsonObject(with: Data(text.utf8)) as? [String: Any],
        let lines = record["lines"] as? Int
      else {
        Issue.record("not a batch record: \(entry)")
        return total
      }
      return total + lines
    }
  }

  /// Waits until every entry is written and acknowledged.
  func waitUntilDone(_ server: RedisServer, entries: Int, _ process: StreamProcess) {
    let done = process.wait(seconds: 120) {
      linesDone(server) >= entries && server.progress("in", group: "g")?.pending == 0
    }
    #expect(done, "not done: \(linesDone(server)) of \(entries); \(process.stderr)")
  }

  /// A Prometheus text file's samples by name with labels (`# ` lines skipped).
  func prometheusSamples(_ text: String) -> [String: Double] {
    #expect(text.hasSuffix("\n"), "the format ends with a line feed")
    var samples: [String: Double] = [:]
    for line in text.split(separator: "\n") where !line.hasPrefix("#") {
      guard let space = line.lastIndex(of: " "),
        let value = Double(line[line.index(after: space)...])
      else {
        Issue.record("not a sample: \(line)")
        continue
      }
      samples[String(line[..<space])] = value
    }
    return samples
  }

  func outputLines(_ server: RedisServer, _ gateways: some Sequence<String>) -> [String: [String]] {
    var result: [String: [String]] = [:]
    for gateway in gateways {
      result[gateway] = server.entries("fanout:" + gateway).map { $0["line"]! }
    }
    return result
  }

  @Test(
    "all traffic through the stage: eval's deliveries in eval's order; bad entries rejected, acknowledged and counted"
  )
  func sameAsEval() {
    let world = Self.small
    let server = fedServer(world)
    server.cli(["XADD", "in", "*", "other", "no message field"])
    let metrics = makeTemporaryDirectory() + "/fanout.prom"
    let process = stage(server, world, consumer: "c1", extra: ["--metrics", metrics])
    waitUntilDone(server, entries: world.lines.count + 1, process)
    stop(process)
    // The Prometheus file written at the stop is valid for Prometheus' own
    // checker, its families in name order, and holds eval's counts.
    let check = runProcess(
      "/usr/bin/promtool", ["check", "metrics"], input: Array(readText(metrics).utf8))
    #expect(check.status == 0, "promtool: \(check.text) \(check.stderr)")
    let families = readText(metrics).split(separator: "\n").filter { $0.hasPrefix("# HELP ") }
    #expect(families.count > 10 && families == families.sorted(), "\(families)")
    let samples = prometheusSamples(readText(metrics))
    let summary = world.summary
    #expect(samples["fanout_stream_lines_total"] == Double(world.lines.count + 1))
    #expect(samples["fanout_stream_rejected_lines_total"] == Double(world.rejected + 1))
    for key in ["messages", "pairs", "delivered"] {
      let name = "fanout_stream_\(key == "delivered" ? "delivered_pairs" : key)_total"
      #expect(samples[name] == (summary[key] as! NSNumber).doubleValue, "\(name)")
    }
    for (gateway, count) in summary["deliveries"] as! [String: NSNumber] {
      #expect(
        samples[#"fanout_stream_deliveries_total{gateway="\#(gateway)"}"#] == count.doubleValue)
    }
    #expect(samples["fanout_stream_lag_pending"] == 0)
    #expect(samples["fanout_stream_lag_not_read"] == 0)
    #expect(
      samples["fanout_stream_batch_latency_seconds_count"] == samples["fanout_stream_batches_total"]
    )
    let expected = world.deliveries
    #expect(outputLines(server, expected.keys) == expected)
    let rejected = server.entries("fanout:rejected")
    #expect(rejected.count == world.rejected + 1)
    let inputIDs = Set(server.entries("in").map { $0["id"]! })
    #expect(rejected.allSatisfy { inputIDs.contains($0["entry"] ?? "") })
    #expect(rejected.contains { $0["error"] == "no 'message' field" })
    #expect(server.progress("in", group: "g")?.pending == 0)
    #expect(process.stderr.contains("\(world.rejected + 1) rejected"), "\(process.stderr)")
  }

  @Test(
    "kill -9 of the stage at random points, five times, in a 50k-message run: nothing lost, nothing doubled"
  )
  func killedAndRestarted() {
    let world = Self.large
    let server = fedServer(world)
    var random = SystemRandomNumberGenerator()
    var kills = 0
    for _ in 0..<5 {
      let process = stage(server, world, consumer: "c1")
      // Once it has written something, at a random point of the next 400 ms.
      process.wait(seconds: 30) { linesDone(server) > 0 || process.stderr.contains("ready") }
      usleep(UInt32.random(in: 50_000...400_000, using: &random))
      process.send(SIGKILL)
      _ = process.waitForExit()
      kills += 1
    }
    #expect(kills == 5)
    #expect(linesDone(server) < world.lines.count, "the run ended before the kills")
    let last = stage(server, world, consumer: "c1")
    finishAsEval(last, server, world, inOrder: true)
  }

  @Test(
    "restarted without --consumer: the host name is the consumer, and it finishes its pending entries"
  )
  func defaultConsumerResumes() {
    let world = Self.small
    let server = fedServer(world)
    // A stage under the default name read 700 entries and died before writing.
    var host = [CChar](repeating: 0, count: 256)
    gethostname(&host, host.count - 1)
    server.cli(["XGROUP", "CREATE", "in", "g", "0"])
    server.cli([
      "XREADGROUP", "GROUP", "g", String(cString: host), "COUNT", "700", "STREAMS", "in", ">",
    ])
    #expect(server.progress("in", group: "g")?.pending == 700)
    let restarted = stage(server, world, consumer: nil)
    waitUntilDone(server, entries: world.lines.count, restarted)
    stop(restarted)
    // Its own pending entries first: eval's order exactly.
    expectEvalOutput(server, world, inOrder: true)
  }

  @Test(
    "contract v3: notification fields as eval's, and each read's update line in a fanout:updates entry naming the read's entry"
  )
  func notifications() {
    let world = World(users: 1500, messages: 2000, seed: 23, genFlags: ["--v3"])
    let server = fedServer(world)
    let process = stage(server, world, consumer: "c1")
    waitUntilDone(server, entries: world.lines.count, process)
    stop(process)
    var expected = world.deliveries
    let updates = expected.removeValue(forKey: "updates") ?? []
    #expect(updates.count > 10)
    #expect(outputLines(server, expected.keys) == expected)
    // The same update lines in the same order; `line` is the batch's own
    // numbering on Redis, so it is compared through the entry it names.
    let written = server.entries("fanout:updates")
    func body(_ line: String) -> Substring { line.drop { $0 != "," } }
    #expect(written.map { body($0["update"]!) } == updates.map { body($0) })
    let messageOf = Dictionary(
      uniqueKeysWithValues: server.entries("in").map { ($0["id"]!, $0["message"] ?? "") })
    for (entry, line) in zip(written, updates) {
      let read = messageOf[entry["entry"] ?? ""] ?? ""
      let id = line.split(separator: ",")[1]  // "id":"r…"
      #expect(read.contains(#""event":"read""#) && read.contains(String(id)), "\(entry) \(line)")
    }
  }

  @Test("two consumers in one group, one dead with entries pending: --claim-idle-ms finishes them")
  func claimed() {
    let world = Self.small
    let server = fedServer(world)
    // c1 reads 700 entries and dies before writing anything.
    server.cli(["XGROUP", "CREATE", "in", "g", "0"])
    let read = server.cli(["XREADGROUP", "GROUP", "g", "c1", "COUNT", "700", "STREAMS", "in", ">"])
    #expect(read.status == 0)
    #expect(server.progress("in", group: "g")?.pending == 700)
    let c2 = stage(server, world, consumer: "c2", extra: ["--claim-idle-ms", "300"])
    waitUntilDone(server, entries: world.lines.count, c2)
    stop(c2)
    // Claimed entries come after newer ones: the same lines, per gateway as multisets.
    expectEvalOutput(server, world, inOrder: false)
  }

  @Test("--claim-idle-ms shorter than a batch's window: no entry comes twice")
  func claimWithinWindow() {
    let world = Self.small
    let server = fedServer(world)
    let process = stage(
      server, world, consumer: "c1",
      extra: ["--claim-idle-ms", "1", "--batch-ms", "200", "--batch-messages", "5000"])
    finishAsEval(process, server, world, inOrder: false)
  }

  @Test(
    "redis-server killed and restarted (append-only file on) mid-run: the stage reconnects, the result is exact"
  )
  func serverRestarted() {
    killServerMidRun(Self.large, afterLines: 0)
  }

  @Test(
    "redis-server killed and restarted mid-run with rule 8 and contract v3 on: the batches in flight are sent again as evaluated, each counted once by the ledgers, the result is exact"
  )
  func serverRestartedWithLedgers() {
    killServerMidRun(
      World(users: 5000, messages: 20000, seed: 23, genFlags: ["--v3"]), afterLines: 2000,
      extra: ["--batch-messages", "500"])
  }

  /// Kills redis-server once the stage has written more than `afterLines`
  /// lines, starts it again (append-only file on), and expects the stage to
  /// reconnect and end with eval's output, in order.
  func killServerMidRun(_ world: World, afterLines: Int, extra: [String] = []) {
    let server = fedServer(world)
    let process = stage(server, world, consumer: "c1", extra: extra)
    process.wait(seconds: 30) { linesDone(server) > afterLines }
    server.stop(signal: SIGKILL)
    usleep(500_000)
    server.start()
    waitUntilDone(server, entries: world.lines.count, process)
    stop(process)
    #expect(process.stderr.contains("reconnecting"), "\(process.stderr)")
    expectEvalOutput(server, world, inOrder: true)
  }

  @Test(
    "a server that cannot answer yet (BUSY running a script) when the stage connects: it waits and goes on, the result is exact"
  )
  func serverBusy() throws {
    let world = Self.small
    let server = fedServer(world)
    server.cli(["CONFIG", "SET", "busy-reply-threshold", "50"])
    // A script that holds the server for 2 s: other clients are told BUSY
    // (as they are told LOADING while a restarted server reads its data).
    let script = Process()
    script.executableURL = URL(fileURLWithPath: "/usr/bin/redis-cli")
    script.arguments = [
      "-s", server.socket, "EVAL",
      "local s = tonumber(redis.call('TIME')[1]) while tonumber(redis.call('TIME')[1]) < s + 2 do end return 1",
      "0",
    ]
    script.standardOutput = FileHandle.nullDevice
    try script.run()
    usleep(300_000)
    #expect(server.cli(["PING"]).text.hasPrefix("BUSY"))
    let process = stage(server, world, consumer: "c1")
    script.waitUntilExit()
    finishAsEval(process, server, world, inOrder: true)
    #expect(process.stderr.contains("not ready: BUSY"), "\(process.stderr)")
  }

  @Test("a refused snapshot exits 65 with nothing read or acknowledged")
  func refusedSnapshot() {
    let server = RedisServer()
    server.feed("in", lines: Self.small.lines)
    let bad = SQLiteFixture.copy(
      Self.small.snapshot, applying: "INSERT INTO devices VALUES (99999999, 'ghost', 'apns', 't');")
    let r = runProcess(
      fanoutExecutable,
      ["stream", "--snapshot", bad, "--redis", server.url, "--input", "in", "--group", "g"])
    #expect(r.status == 65, "\(r.stderr)")
    #expect(server.progress("in", group: "g") == nil)
    #expect(server.cli(["XLEN", "fanout:batches"]).text == "0\n")
  }

  @Test("--max-len trims the output streams (approximately), --out-prefix names them")
  func trimmed() {
    let world = Self.small
    let server = fedServer(world)
    let process = stage(
      server, world, consumer: "c1", extra: ["--max-len", "10", "--out-prefix", "trim"])
    let done = process.wait(seconds: 120) {
      server.progress("in", group: "g")?.lag == 0 && server.progress("in", group: "g")?.pending == 0
    }
    #expect(done, "\(process.stderr)")
    stop(process)
    for (gateway, lines) in world.deliveries {
      let length = Int(server.cli(["XLEN", "trim:" + gateway]).text.dropLast()) ?? -1
      // `MAXLEN ~` trims whole nodes of the stream (100 entries by default).
      #expect(length >= 10 && length <= 200 && length < lines.count, "\(gateway): \(length)")
    }
    #expect(server.cli(["EXISTS", "fanout:batches"]).text == "0\n")
  }

  @Test(
    "a password from FANOUT_REDIS_PASSWORD and ?db=N: the streams in that database; a wrong password exits 64"
  )
  func passwordAndDatabase() {
    let server = RedisServer(password: "s3cret")
    let world = Self.small
    server.feed("in", lines: Array(world.lines.prefix(300)))
    server.cli(["-n", "3", "XADD", "in", "*", "message", world.lines[0]])
    let url = server.url + "?db=3"
    func run(password: String) -> StreamProcess {
      StreamProcess(
        [
          "--snapshot", world.snapshot, "--redis", url, "--input", "in", "--group", "g",
          "--from-start", "--consumer", "c1", "--status-seconds", "60",
        ], environment: ["FANOUT_REDIS_PASSWORD": password])
    }
    let wrong = run(password: "guess")
    #expect(wrong.waitForExit() == 64, "\(wrong.stderr)")
    #expect(
      wrong.stderr.contains("WRONGPASS") || wrong.stderr.contains("invalid"), "\(wrong.stderr)")
    let right = run(password: "s3cret")
    let done = right.wait(seconds: 60) {
      server.cli(["-n", "3", "XLEN", "fanout:batches"]).text != "0\n"
    }
    #expect(done, "\(right.stderr)")
    stop(right)
    #expect(right.stderr.contains("stopped (SIGTERM): 1 line, 1 message,"), "\(right.stderr)")
    // Database 0 untouched: its input unread, no output streams.
    #expect(server.cli(["EXISTS", "fanout:batches"]).text == "0\n")
    #expect(server.progress("in", group: "g") == nil)
  }

  @Test(
    "a batch Redis cannot apply (a gateway key that is not a stream, no memory left): exit 73, nothing of it applied, its entries pending"
  )
  func batchRefused() {
    let world = Self.small
    let lines = Array(world.lines.prefix(200))
    // A key of another type where a gateway's stream goes.
    let wrongType = RedisServer()
    wrongType.feed("in", lines: lines)
    wrongType.cli(["SET", "fanout:apns", "not a stream"])
    let first = stage(wrongType, world, consumer: "c1")
    #expect(first.waitForExit() == 73, "\(first.stderr)")
    #expect(first.stderr.contains("'fanout:apns' is a string, not a stream"), "\(first.stderr)")
    #expect(wrongType.cli(["EXISTS", "fanout:batches", "fanout:fcm"]).text == "0\n")
    #expect(wrongType.progress("in", group: "g")?.pending == 200)

    // No memory left for the outputs: the whole transaction is refused.
    let full = RedisServer()
    full.feed("in", lines: lines)
    let used =
      full.cli(["INFO", "memory"]).text.split(separator: "\r\n").first {
        $0.hasPrefix("used_memory:")
      }.flatMap { Int($0.dropFirst("used_memory:".count)) } ?? 0
    full.cli(["CONFIG", "SET", "maxmemory", "\(used + 50_000)"])
    let second = stage(full, world, consumer: "c1")
    #expect(second.waitForExit() == 73, "\(second.stderr)")
    #expect(second.stderr.contains("OOM"), "\(second.stderr)")
    #expect(full.cli(["EXISTS", "fanout:batches", "fanout:apns"]).text == "0\n")
    #expect(full.progress("in", group: "g")?.pending == 200)
  }

  @Test(
    "the input stream deleted mid-run: the group is created again and new entries are read; a key of another type in its place exits 66"
  )
  func inputDeleted() {
    let server = RedisServer()
    let world = Self.small
    server.feed("in", lines: Array(world.lines[..<100]))
    let process = stage(server, world, consumer: "c1")
    #expect(process.wait(seconds: 60) { linesDone(server) == 100 }, "\(process.stderr)")
    server.cli(["DEL", "in"])
    #expect(
      process.wait(seconds: 30) { process.stderr.contains("was deleted") }, "\(process.stderr)")
    server.feed("in", lines: Array(world.lines[100..<150]))
    #expect(process.wait(seconds: 60) { linesDone(server) == 150 }, "\(process.stderr)")
    #expect(server.progress("in", group: "g")?.pending == 0)
    // A string where the stream was: nothing to read, ever.
    server.cli(["DEL", "in"])
    server.cli(["SET", "in", "not a stream"])
    #expect(process.waitForExit() == 66, "\(process.stderr)")
    #expect(process.stderr.contains("WRONGTYPE"), "\(process.stderr)")
  }

  @Test(
    "a writer replaces the snapshot mid-run: batches before the swap use the old one, all later ones the new"
  )
  func snapshotReplaced() throws {
    let world = Self.small
    let server = RedisServer()
    server.feed("in", lines: Array(world.lines[..<1000]))
    let snapshot = makeTemporaryDirectory() + "/snapshot.sqlite"
    try FileManager.default.copyItem(atPath: world.snapshot, toPath: snapshot)
    let process = stage(server, world, consumer: "c1", extra: ["--snapshot", snapshot])
    #expect(process.wait(seconds: 60) { linesDone(server) == 1000 }, "\(process.stderr)")
    // The new snapshot has no devices: nothing is delivered under it.
    replaceAtomically(
      snapshot, with: SQLiteFixture.copy(world.snapshot, applying: "DELETE FROM devices;"))
    #expect(
      process.wait(seconds: 30) { process.stderr.contains("generation 2 in use") },
      "\(process.stderr)")
    server.feed("in", lines: Array(world.lines[1000..<2000]))
    #expect(process.wait(seconds: 60) { linesDone(server) == 2000 }, "\(process.stderr)")
    stop(process)
    let records = server.entries("fanout:batches").compactMap { entry in
      entry["batch"].flatMap {
        try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any]
      }
    }
    func generation(_ record: [String: Any]) -> Int? {
      (record["snapshot"] as? [String: Any])?["generation"] as? Int
    }
    let old = records.filter { generation($0) == 1 }
    let new = records.filter { generation($0) == 2 }
    #expect(old.count + new.count == records.count)
    #expect(old.reduce(0) { $0 + ($1["lines"] as! Int) } == 1000)
    #expect(new.reduce(0) { $0 + ($1["lines"] as! Int) } == 1000)
    #expect(new.allSatisfy { $0["delivered"] as? Int == 0 })
    #expect(old.contains { ($0["delivered"] as? Int ?? 0) > 0 })
  }

  @Test("make redis-demo's script: the sample through a private server, the deliveries printed")
  func demoScript() {
    let snapshot = SQLiteFixture.make(readText(datasetURL("sample/snapshot.sql").path))
    let traffic = datasetURL("sample/traffic.ndjson").path
    let demo = runProcess(
      packageRoot.appendingPathComponent("deploy/redis/demo.sh").path,
      [fanoutExecutable, snapshot, traffic])
    #expect(demo.status == 0, "\(demo.stderr)")
    let eval = makeTemporaryDirectory() + "/eval"
    let r = runProcess(
      fanoutExecutable, ["eval", "--snapshot", snapshot, "--messages", traffic, "--out", eval])
    #expect(r.status == 0)
    for name in listDirectory(eval) where name.hasSuffix(".ndjson.lz4") {
      let lines = lz4CommandLineDecode(eval + "/" + name)!.split(separator: "\n").count
      let gateway = name.dropLast(".ndjson.lz4".count)
      #expect(demo.text.contains("== fanout:\(gateway): \(lines) entries"), "\(demo.text)")
    }
    #expect(demo.text.contains("== fanout:rejected: "))
    // The server was stopped and its folder removed.
    let folder = demo.text.split(separator: "\n").first { $0.hasPrefix("redis-server ") }
    let socket = folder.map { String($0.split(separator: " ").last!) } ?? ""
    #expect(!socket.isEmpty && !FileManager.default.fileExists(atPath: socket))
  }
}
