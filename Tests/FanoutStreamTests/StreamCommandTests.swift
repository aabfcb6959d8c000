import FanoutTestSupport
import Foundation
import Synchronization
import Testing

/// `fanout stream` driven as a subprocess, compared with `fanout eval` on
/// the same lines.
@Suite("fanout stream, end to end", .serialized)
struct StreamCommandTests {
  @Test("to the end of input: segments hold exactly what eval writes, malformed lines rejected")
  func endOfInput() throws {
    let out = makeTemporaryDirectory() + "/out"
    let stream = StreamProcess([
      "--snapshot", generated.snapshot, "--out", out, "--batch-messages", "37",
      "--rotate-mb", "0.02", "--threads", "2",
    ])
    stream.write(bytes(trafficLines))
    #expect(stream.waitForExit() == 0, "\(stream.stderr)")
    let folder = SegmentFolder(out)
    let expected = evalDeliveries(snapshot: generated.snapshot, input: bytes(trafficLines))
    #expect(folder.deliveries == expected)
    #expect(folder.partialFiles.isEmpty)
    #expect(folder.segments.count > 3, "rotation by size")
    #expect(folder.records.map { $0["batch"] as! Int } == Array(1...folder.records.count))
    #expect(sum(folder.records, "lines") == trafficLines.count)
    #expect(sum(folder.records, "rejected") == trafficLines.count / 401)
    #expect(folder.records.allSatisfy { ($0["lines"] as! Int) <= 37 })
    // The lz4 tool reads a segment file: one frame per batch, concatenated.
    let apns = listDirectory(out).first { $0.hasPrefix("apns-") }!
    #expect(lz4CommandLineDecode(out + "/" + apns)?.hasSuffix("}]}\n") == true)
    #expect(stream.stderr.contains("stopped (end of input): \(trafficLines.count) lines"))
  }

  @Test(
    "contract v2 and v3 data: the same deliveries (deliver_at, throttle, notification fields) and update lines as eval, batch sizes 1, 37, 1000",
    arguments: ["--v2", "--v3"])
  func generatedData(_ contract: String) throws {
    let dir = makeTemporaryDirectory("fanout-stream" + contract)
    let gen = runProcess(
      fanoutExecutable,
      ["gen", "--users", "1500", "--messages", "1500", "--seed", "9", contract, "--out", dir])
    #expect(gen.status == 0, "\(gen.stderr)")
    let snapshot = dir + "/snapshot.sqlite"
    let input = Array(readText(dir + "/traffic.ndjson").utf8)
    let expected = evalDeliveries(snapshot: snapshot, input: input)
    // The data reaches what batches must not change.
    #expect(expected.gateways.values.contains { $0.contains("deliver_at") })
    if contract == "--v3" {
      #expect(expected.gateways["updates"]?.contains(#""removed":["#) == true)
      #expect(expected.gateways.values.contains { $0.contains(#""hide":["#) })
    }
    for batch in ["1", "37", "1000"] {
      let out = makeTemporaryDirectory() + "/out"
      let stream = StreamProcess([
        "--snapshot", snapshot, "--out", out, "--batch-messages", batch, "--threads", "2",
      ])
      stream.write(input)
      #expect(stream.waitForExit() == 0, "\(stream.stderr)")
      #expect(SegmentFolder(out).deliveries == expected, "\(contract), batch \(batch)")
    }
  }

  @Test("--log-format json: one object per line (time, level, event, message, fields)")
  func jsonLog() throws {
    let dir = makeTemporaryDirectory()
    let stream = StreamProcess([
      "--snapshot", generated.snapshot, "--out", dir + "/out", "--log-format", "json",
    ])
    stream.write(bytes(trafficLines))
    #expect(stream.waitForExit() == 0, "\(stream.stderr)")
    let events = try stream.stderr.split(separator: "\n").map {
      try JSONSerialization.jsonObject(with: Data($0.utf8)) as! [String: Any]
    }
    #expect(
      events.map { $0["event"] as? String } == ["snapshot_loaded", "ready", "status", "stopped"])
    for event in events {
      #expect((event["time"] as? String)?.hasSuffix("Z") == true)
      #expect(event["level"] as? String == "info")
      #expect((event["message"] as? String)?.isEmpty == false)
    }
    let stopped = events.last?["fields"] as? [String: Any] ?? [:]
    #expect(stopped["lines"] as? Int == trafficLines.count)
    #expect(stopped["rejected"] as? Int == trafficLines.count / 401)
    #expect(stopped["reason"] as? String == "end of input")
    let metrics = (events[2]["fields"] as? [String: Any])?["metrics"] as? [String: Any]
    #expect(metrics?["lines"] as? Int == trafficLines.count)

    let refused = runProcess(
      fanoutExecutable,
      [
        "stream", "--snapshot", dir + "/missing.sqlite", "--out", dir + "/o", "--log-format",
        "json",
      ])
    #expect(refused.status == 66)
    let failed =
      try JSONSerialization.jsonObject(with: Data(refused.stderr.utf8)) as? [String: Any] ?? [:]
    #expect(failed["event"] as? String == "failed" && failed["level"] as? String == "error")
    #expect((failed["fields"] as? [String: Any])?["exit_status"] as? Int == 66)
  }

  @Test("refusals: exit code and message, and no output folder")
  func refusals() throws {
    let dir = makeTemporaryDirectory()
    let broken = SQLiteFixture.copy(
      generated.snapshot, applying: "UPDATE users SET chat_level = 'loud' WHERE rowid = 3")
    let notASocket = dir + "/plain-file"
    _ = FileManager.default.createFile(atPath: notASocket, contents: Data("x".utf8))
    let cases: [(arguments: [String], code: Int32, message: String)] = [
      (["--snapshot", broken], 65, "column chat_level"),
      (["--snapshot", dir + "/missing.sqlite"], 66, "snapshot unreadable"),
      (["--snapshot", generated.snapshot, "--batch-messages", "0"], 64, "--batch-messages"),
      (["--snapshot", generated.snapshot, "--batch-ms", "-1"], 64, "--batch-ms"),
      (["--snapshot", generated.snapshot, "--listen", notASocket], 66, "not a socket"),
    ]
    for (k, c) in cases.enumerated() {
      let out = dir + "/out-\(k)"
      let result = runProcess(fanoutExecutable, ["stream", "--out", out] + c.arguments, input: [])
      #expect(result.status == c.code, "\(c.arguments): \(result.stderr)")
      #expect(result.stderr.contains(c.message), "\(c.arguments): \(result.stderr)")
      #expect(!FileManager.default.fileExists(atPath: out), "\(c.arguments)")
    }
    #expect(readText(notASocket) == "x", "the file at --listen is left alone")
  }

  /// The metrics and ready files are written over (the ready file removed
  /// at the end): never over the snapshot, the file on standard input, or
  /// each other.
  @Test("--metrics and --ready-file never name what the stage reads, nor one file")
  func writtenFilesNeverInputs() throws {
    let dir = makeTemporaryDirectory()
    let snapshot = dir + "/snapshot.sqlite"
    try FileManager.default.copyItem(atPath: generated.snapshot, toPath: snapshot)
    let before = try Data(contentsOf: URL(fileURLWithPath: snapshot))
    let traffic = dir + "/traffic.ndjson"
    try Data(bytes(trafficLines[..<20])).write(to: URL(fileURLWithPath: traffic))
    // (From the temporary folder: a file named "-" would land there.)
    let stream =
      "cd '\(dir)' && '\(fanoutExecutable)' stream --snapshot '\(snapshot)' --out '\(dir)/out'"
    let cases: [(command: String, message: String)] = [
      (stream + " --metrics '\(snapshot)' < /dev/null", "is the snapshot the stage reads"),
      (
        stream + " --ready-file '\(traffic)' < '\(traffic)'",
        "is the file the stage reads on standard input"
      ),
      (
        stream + " --metrics '\(dir)/m' --ready-file '\(dir)/m' < /dev/null",
        "--metrics and --ready-file name one file"
      ),
      (stream + " --metrics - < /dev/null", "--metrics takes a file's path; '-'"),
    ]
    for c in cases {
      let result = runProcess("/bin/sh", ["-c", c.command])
      #expect(result.status == 64, "\(c.command): \(result.stderr)")
      #expect(result.stderr.contains(c.message), "\(result.stderr)")
    }
    #expect(try Data(contentsOf: URL(fileURLWithPath: snapshot)) == before)
    #expect(try Data(contentsOf: URL(fileURLWithPath: traffic)) == Data(bytes(trafficLines[..<20])))
  }

  @Test("--out -: one stream, each delivery line naming its gateway, a record per batch")
  func standardOutput() throws {
    let sample = SQLiteFixture.make(readText(datasetURL("sample/snapshot.sql").path))
    let input = Array(readText(datasetURL("sample/traffic.ndjson").path).utf8)
    let stream = StreamProcess(["--snapshot", sample, "--out", "-", "--batch-messages", "5"])
    stream.write(input)
    #expect(stream.waitForExit() == 0, "\(stream.stderr)")
    let (deliveries, records) = splitStandardOutput(stream.stdout)
    #expect(deliveries == evalDeliveries(snapshot: sample, input: input))
    #expect(records.count == 5)  // 21 lines in batches of 5
    let last = String(decoding: stream.stdout, as: UTF8.self).split(separator: "\n").last!
    #expect(last.hasPrefix(#"{"batch":5,"snapshot":{"generation":1,"#))
  }

  @Test("SIGHUP after replacing the snapshot: earlier lines follow the old one, later the new")
  func reloadOnSIGHUP() throws {
    // The file watcher is off for the test's length: only the signal can reload.
    try reload(options: ["--watch-seconds", "3600"]) { stream in stream.send(SIGHUP) }
  }

  @Test("replacing the snapshot file alone is noticed")
  func reloadOnReplacement() throws {
    try reload(options: ["--watch-seconds", "0.2"]) { _ in }
  }

  /// Half the traffic, a new snapshot swapped in by `trigger`, the other half.
  private func reload(options: [String], trigger: (StreamProcess) -> Void) throws {
    let dir = makeTemporaryDirectory()
    let live = dir + "/live.sqlite"
    try FileManager.default.copyItem(atPath: generated.snapshot, toPath: live)
    // B: every other user in all-day DND, and fewer devices.
    let b = SQLiteFixture.copy(
      generated.snapshot,
      applying: """
        UPDATE users SET dnd_start = 0, dnd_end = 0 WHERE rowid % 2 = 0;
        DELETE FROM devices WHERE device_id % 3 = 0;
        """)
    let (first, second) = (Array(trafficLines[..<1_500]), Array(trafficLines[1_500...]))
    let stream = StreamProcess(
      ["--snapshot", live, "--out", "-", "--batch-messages", "100", "--threads", "2"] + options)
    stream.write(bytes(first))
    #expect(stream.wait { sum(stream.batchRecords, "lines") == first.count })
    replaceAtomically(live, with: b)
    trigger(stream)
    #expect(stream.wait { stream.stderr.contains("in use from batch") }, "\(stream.stderr)")
    stream.write(bytes(second))
    #expect(stream.waitForExit() == 0, "\(stream.stderr)")

    let (deliveries, records) = splitStandardOutput(stream.stdout)
    let old = evalDeliveries(snapshot: generated.snapshot, input: bytes(first))
    let new = evalDeliveries(snapshot: b, input: bytes(second))
    for gateway in Set(old.gateways.keys).union(new.gateways.keys) {
      #expect(
        deliveries.gateways[gateway] == (old.gateways[gateway] ?? "")
          + (new.gateways[gateway] ?? ""),
        "\(gateway)")
    }
    #expect(old != evalDeliveries(snapshot: b, input: bytes(first)), "B must change decisions")
    // Each batch names the snapshot it was evaluated against.
    let byGeneration = Dictionary(grouping: records) {
      ($0["snapshot"] as! [String: Any])["generation"] as! Int
    }
    #expect(sum(byGeneration[1]!, "lines") == first.count)
    let later = records.filter { (($0["snapshot"] as! [String: Any])["generation"] as! Int) > 1 }
    #expect(sum(later, "lines") == second.count)
    #expect(later.allSatisfy { ($0["snapshot"] as! [String: Any])["inode"] as! Int == inode(live) })
  }

  @Test("a refused snapshot keeps the one in use, and says why")
  func refusedReload() throws {
    let dir = makeTemporaryDirectory()
    let live = dir + "/live.sqlite"
    try FileManager.default.copyItem(atPath: generated.snapshot, toPath: live)
    let broken = SQLiteFixture.copy(
      generated.snapshot, applying: "UPDATE users SET chat_level = 'loud' WHERE rowid = 3")
    let stream = StreamProcess([
      "--snapshot", live, "--out", "-", "--batch-messages", "100", "--watch-seconds", "3600",
    ])
    stream.write(bytes(trafficLines[..<1_000]))
    replaceAtomically(live, with: broken)
    stream.send(SIGHUP)
    #expect(stream.wait { stream.stderr.contains("refused, the one in use stays") })
    #expect(stream.stderr.contains("column chat_level"), "\(stream.stderr)")
    stream.write(bytes(trafficLines[1_000...]))
    #expect(stream.waitForExit() == 0)
    #expect(
      splitStandardOutput(stream.stdout).deliveries
        == evalDeliveries(snapshot: generated.snapshot, input: bytes(trafficLines)))
  }

  @Test("SIGTERM mid-stream: every line read is in the output once, files closed, exit 0")
  func sigterm() throws {
    let out = makeTemporaryDirectory() + "/out"
    let metrics = makeTemporaryDirectory() + "/metrics.json"
    let stream = StreamProcess([
      "--snapshot", generated.snapshot, "--out", out, "--batch-messages", "50",
      "--metrics", metrics, "--status-seconds", "0.1",
    ])
    let lines = Array(repeatElement(trafficLines, count: 20).joined())
    let writer = Thread { stream.write(bytes(lines)) }
    writer.start()
    #expect(
      stream.wait {
        guard let data = FileManager.default.contents(atPath: metrics),
          let json = try? JSONSerialization.jsonObject(with: data) as? [String: Any]
        else { return false }
        return json["lines"] as? Int ?? 0 >= 2_000
      })
    stream.send(SIGTERM)
    #expect(stream.waitForExit() == 0, "\(stream.stderr)")
    let stopped = try #require(
      stream.stderr.split(separator: "\n").last { $0.contains("stopped (SIGTERM): ") })
    let accepted = try #require(
      Int(stopped.components(separatedBy: "(SIGTERM): ")[1].prefix { $0.isNumber }))
    #expect(accepted >= 2_000 && accepted < lines.count)
    let folder = SegmentFolder(out)
    #expect(folder.partialFiles.isEmpty)
    #expect(!folder.hasLockFile)
    #expect(sum(folder.records, "lines") == accepted)
    #expect(
      folder.deliveries
        == evalDeliveries(snapshot: generated.snapshot, input: bytes(lines[..<accepted])))
  }

  @Test("kill -9 leaves only whole files under final names; a restart continues the numbering")
  func killNine() throws {
    let out = makeTemporaryDirectory() + "/out"
    let metrics = makeTemporaryDirectory() + "/metrics.json"
    let stream = StreamProcess([
      "--snapshot", generated.snapshot, "--out", out, "--batch-messages", "20", "--rotate-mb",
      "0.01",
      "--metrics", metrics, "--status-seconds", "0.05",
    ])
    func evaluatedLines() -> Int {
      guard let data = FileManager.default.contents(atPath: metrics),
        let json = try? JSONSerialization.jsonObject(with: data) as? [String: Any]
      else { return 0 }
      return json["lines"] as? Int ?? 0
    }
    // Segments rotate by size; then a few lines at a time until a segment is
    // left open (a batch can itself fill one up and close it).
    stream.write(bytes(trafficLines))
    var sent = trafficLines.count
    #expect(stream.wait { evaluatedLines() == sent })
    for k in 0..<50 where !listDirectory(out).contains(where: { $0.hasSuffix(".partial") }) {
      stream.write(bytes(trafficLines[(3 * k)..<(3 * k + 3)]))
      sent += 3
      #expect(stream.wait { evaluatedLines() == sent })
    }
    stream.send(SIGKILL)
    _ = stream.waitForExit()
    let folder = SegmentFolder(out)  // decodes every final file whole
    #expect(!folder.partialFiles.isEmpty, "the open segment stays aside")
    #expect(folder.partialFiles.allSatisfy { $0.hasSuffix(".partial") })
    for file in listDirectory(out) where file.hasSuffix(".lz4") && !file.hasPrefix(".") {
      #expect(runProcess("/usr/bin/lz4", ["-t", out + "/" + file]).status == 0, "\(file)")
    }
    // Segment by segment, the records account for every delivery line.
    let recordDeliveries = folder.records.reduce(0) { total, record in
      total + (record["deliveries"] as! [String: Int]).values.reduce(0, +)
    }
    let lineRecipients = folder.deliveries.gateways.values.reduce(0) {
      $0 + $1.components(separatedBy: #""device":"#).count - 1
    }
    #expect(recordDeliveries == lineRecipients)

    let restart = StreamProcess(["--snapshot", generated.snapshot, "--out", out])
    restart.write(bytes(trafficLines[..<100]))
    #expect(restart.waitForExit() == 0)
    #expect(restart.stderr.contains("an incomplete file left by an earlier run"))
    let after = SegmentFolder(out)
    #expect(after.partialFiles.isEmpty)
    #expect(after.segments == folder.segments.union([folder.segments.max()! + 1]))
  }

  /// A partial file's name is someone else's text (anyone who could write
  /// the folder chose it): the log names it with its control characters
  /// shown, in both formats.
  @Test("a leftover partial file named with an escape sequence is logged, not sent to the terminal")
  func leftoverNamedWithEscape() throws {
    for format in ["text", "json"] {
      let out = makeTemporaryDirectory() + "/out"
      #expect(mkdir(out, 0o700) == 0)
      let name = ".x\u{1B}]0;pwned\u{07}-000001.ndjson.partial"
      try "".write(toFile: out + "/" + name, atomically: false, encoding: .utf8)
      // Another program's partial file is not a segment's: it stays.
      try "x".write(toFile: out + "/.notes.txt.partial", atomically: false, encoding: .utf8)
      let stream = StreamProcess([
        "--snapshot", generated.snapshot, "--out", out, "--log-format", format,
      ])
      stream.write(bytes(trafficLines[..<10]))
      #expect(stream.waitForExit() == 0, "\(stream.stderr)")
      #expect(!listDirectory(out).contains(name))
      #expect(listDirectory(out).contains(".notes.txt.partial"))
      #expect(!stream.stderr.contains("\u{1B}"), "\(format)")
      let shown =
        format == "text"
        ? "removed '.x\\u{1B}]0;pwned\\u{7}-000001.ndjson.partial'"
        : #".x\u001b]0;pwned\u0007-000001.ndjson.partial"#
      #expect(stream.stderr.contains(shown), "\(stream.stderr)")
    }
  }

  @Test("backpressure: when evaluation falls behind, reading pauses")
  func backpressure() throws {
    // One channel of 2,000 members: each message is 2,000 pairs.
    let snapshot = SQLiteFixture.make(
      SQLiteFixture.header + """
        WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 2000)
        INSERT INTO users (user_id) SELECT printf('u%05d', i) FROM n;
        INSERT INTO channels VALUES ('broadcast:all', 'broadcast');
        INSERT INTO members SELECT 'broadcast:all', user_id FROM users;
        INSERT INTO devices SELECT rowid, user_id, 'fcm', 'token-' || user_id FROM users;
        """)
    let metrics = makeTemporaryDirectory() + "/metrics.json"
    let stream = StreamProcess([
      "--snapshot", snapshot, "--out", makeTemporaryDirectory() + "/out", "--batch-messages", "10",
      "--threads", "1", "--metrics", metrics, "--status-seconds", "0.1",
    ])
    let line = #"{"id":"m","channel":"broadcast:all","ts":1763719200000}"#
    let total = 200_000
    let written = Mutex(0)
    let writer = Thread {
      for _ in 0..<(total / 1_000) {
        guard stream.write(bytes(repeatElement(line, count: 1_000))) else { return }
        written.withLock { $0 += 1_000 }
      }
    }
    writer.start()
    Thread.sleep(forTimeInterval: 2)
    // 200,000 lines (11 MB) would be read in well under a second if nothing held them back.
    let sent = written.withLock { $0 }
    #expect(sent < 20_000, "the writer got \(sent) lines in")
    let json =
      try JSONSerialization.jsonObject(
        with: FileManager.default.contents(atPath: metrics)!) as! [String: Any]
    let (depth, capacity) = (json["queue_depth"] as! Int, json["queue_capacity"] as! Int)
    #expect(depth <= capacity && capacity == 40)
    stream.send(SIGTERM)
    #expect(stream.waitForExit() == 0, "\(stream.stderr)")
    #expect(stream.stderr.contains("stopped (SIGTERM)"))
  }

  @Test("--listen: several producers at once, each line once, rejections name the producer")
  func socketProducers() throws {
    let dir = makeTemporaryDirectory()
    let (socket, ready) = (dir + "/in.sock", dir + "/ready")
    let stream = StreamProcess([
      "--snapshot", generated.snapshot, "--out", "-", "--listen", socket, "--batch-messages", "64",
      "--ready-file", ready,
    ])
    // The ready file, not the socket file: the socket exists a moment before it listens.
    #expect(stream.wait { FileManager.default.fileExists(atPath: ready) })
    let parts = (0..<3).map { p in Array(trafficLines[(p * 1_000)..<((p + 1) * 1_000)]) }
    DispatchQueue.concurrentPerform(iterations: 3) { p in
      guard let fd = connectProducer(socket) else { return }  // (recorded)
      sendAll(fd, bytes(parts[p]))
      close(fd)
    }
    #expect(stream.wait { stream.stderr.components(separatedBy: "disconnected").count == 4 })
    stream.send(SIGTERM)
    #expect(stream.waitForExit() == 0, "\(stream.stderr)")
    #expect(!FileManager.default.fileExists(atPath: socket), "the socket file is removed")
    let (deliveries, records) = splitStandardOutput(stream.stdout)
    #expect(sum(records, "lines") == 3_000)
    // Producers interleave: compare the sets of lines.
    var expected: [String] = []
    for part in parts {
      expected += evalDeliveries(snapshot: generated.snapshot, input: bytes(part)).gateways.flatMap
      {
        gateway, text in text.split(separator: "\n").map { gateway + " " + $0 }
      }
    }
    let got = deliveries.gateways.flatMap { gateway, text in
      text.split(separator: "\n").map { gateway + " " + $0 }
    }
    #expect(got.sorted() == expected.sorted())
    // Connections are numbered in the order accepted: group the rejected
    // lines by producer, and compare with where each part has its broken lines.
    var rejectedLines: [Int: [Int]] = [:]
    for line in deliveries.rejected.split(separator: "\n") {
      let json = try JSONSerialization.jsonObject(with: Data(line.utf8)) as! [String: Any]
      #expect((json["error"] as! String).hasPrefix("invalid JSON"))
      rejectedLines[json["producer"] as! Int, default: []].append(json["line"] as! Int)
    }
    let brokenLines = parts.map { part in
      part.indices.filter { part[$0].hasPrefix(#"{"id":"broken-"#) }.map { $0 + 1 }
    }
    #expect(Set(rejectedLines.keys) == [1, 2, 3])
    #expect(
      rejectedLines.values.map { $0 }.sorted { $0[0] < $1[0] }
        == brokenLines.sorted { $0[0] < $1[0] })
  }
}
