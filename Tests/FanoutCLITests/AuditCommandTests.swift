import FanoutTestSupport
import Foundation
import Testing

/// `fanout audit` against a generated day: `eval`'s gateway files made into
/// a sent log, faults injected, and the audit must find exactly those.
@Suite("fanout audit")
struct AuditCommandTests {
  /// One push of a sent log, as the test writes it.
  struct Push {
    var message: String
    var user: String
    var gateway: String
    var token: String
    var sentAt: Int64?
    var ts: Int64
    var deferred: Bool
    /// Its message's line in the traffic (0-based).
    var order: Int

    var line: String {
      var fields: [String: Any] = [
        "message": message, "user": user, "gateway": gateway, "token": token,
      ]
      if let sentAt { fields["sent_at"] = sentAt }
      let data = try! JSONSerialization.data(withJSONObject: fields, options: [.sortedKeys])
      return String(decoding: data, as: UTF8.self)
    }
  }

  /// A finding as compared: kind, message, user, token and reason.
  struct Key: Hashable, CustomStringConvertible {
    var kind: String
    var message: String
    var user: String
    var token: String?
    var reason: String?
    var description: String {
      "\(kind) \(message)/\(user)" + (token.map { " \($0)" } ?? "")
        + (reason.map { " (\($0))" } ?? "")
    }
  }

  /// A generated day, evaluated: its folder, and the pushes `eval` decided,
  /// in traffic order (each sent at its delivery time).
  struct Day {
    let dir: String
    let snapshot: String
    var traffic: String { dir + "/traffic.ndjson" }
    var eval: String { dir + "/eval" }
    /// `eval`'s gateway files (not its decisions or update lines).
    var gatewayFiles: [String] { Self.gatewayFiles(in: eval) }

    static func gatewayFiles(in folder: String) -> [String] {
      listDirectory(folder).filter {
        $0.hasSuffix(".ndjson.lz4") && $0 != "decisions.ndjson.lz4" && $0 != "updates.ndjson.lz4"
      }.map { folder + "/" + $0 }
    }
    let pushes: [Push]
    let decisions: [[String: Any]]

    /// - Parameters:
    ///   - contract: `gen`'s `--v2` (a throttle) or `--v3` (notification
    ///     groups too).
    ///   - sql: applied to a copy of the generated snapshot, the day's.
    init(contract: String = "--v2", sql: String? = nil) {
      dir = makeTemporaryDirectory()
      let gen = runProcess(
        fanoutExecutable,
        ["gen", "--users", "2000", "--messages", "4000", "--seed", "3", contract, "--out", dir])
      #expect(gen.status == 0, "\(gen.stderr)")
      let generated = dir + "/snapshot.sqlite"
      snapshot = sql.map { SQLiteFixture.copy(generated, applying: $0) } ?? generated
      let eval = runProcess(
        fanoutExecutable,
        [
          "eval", "--snapshot", snapshot, "--messages", dir + "/traffic.ndjson",
          "--out", dir + "/eval", "--decisions",
        ])
      #expect(eval.status == 0, "\(eval.stderr)")
      var byLine: [(order: Int, push: Push)] = []
      var order: [String: Int] = [:]
      for (k, line) in readText(dir + "/traffic.ndjson").split(separator: "\n").enumerated() {
        if let id = decodeRecord(line)?["id"] as? String, order[id] == nil { order[id] = k }
      }
      for file in Self.gatewayFiles(in: dir + "/eval") {
        let gateway = String(file.split(separator: "/").last!.dropLast(".ndjson.lz4".count))
        for line in (lz4CommandLineDecode(file) ?? "").split(separator: "\n") {
          guard let m = decodeRecord(line) else { continue }
          let ts = (m["ts"] as! NSNumber).int64Value
          for r in m["recipients"] as! [[String: Any]] {
            let deliverAt = (r["deliver_at"] as? NSNumber)?.int64Value
            byLine.append(
              (
                order[m["message"] as! String]!,
                Push(
                  message: m["message"] as! String, user: r["user"] as! String, gateway: gateway,
                  token: r["token"] as! String, sentAt: deliverAt ?? ts, ts: ts,
                  deferred: deliverAt != nil, order: order[m["message"] as! String]!)
              ))
          }
        }
      }
      pushes = byLine.enumerated().sorted {
        ($0.element.order, $0.offset) < ($1.element.order, $1.offset)
      }
      .map(\.element.push)
      decisions = (lz4CommandLineDecode(dir + "/eval/decisions.ndjson.lz4") ?? "")
        .split(separator: "\n").compactMap(decodeRecord)
    }

    /// Runs `fanout audit` of `logs` into a new folder: the process, and
    /// the folder's path.
    func run(_ logs: [String], _ extra: [String] = []) -> (run: ProcessResult, out: String) {
      let out = makeTemporaryDirectory() + "/audit"
      let run = runProcess(
        fanoutExecutable,
        ["audit", "--snapshot", snapshot, "--messages", traffic, "--sent"] + logs
          + ["--out", out] + extra)
      return (run, out)
    }

    /// Audits `logs`; the findings as keys, and the audit's summary.
    func audit(_ logs: [String], _ extra: [String] = [], threads: Int = 2) -> (
      status: Int32, stderr: String, findings: [[String: Any]], summary: [String: Any]
    ) {
      let (run, out) = run(logs, ["--threads", String(threads)] + extra)
      let findings = (lz4CommandLineDecode(out + "/findings.ndjson.lz4") ?? "")
        .split(separator: "\n").compactMap(decodeRecord)
      var summary =
        (try? JSONSerialization.jsonObject(
          with: Data(contentsOf: URL(fileURLWithPath: out + "/audit.json")))) as? [String: Any]
      // The page beside it: its title and heading are the headline.
      if let headline = summary?["headline"] as? String {
        let page = readText(out + "/report.html")
        let escaped = headline.replacingOccurrences(of: "&", with: "&amp;")
        if !page.contains("<title>Audit: \(escaped)</title>")
          || !page.contains("<h1>\(escaped)</h1>")
        {
          summary?["page"] = "report.html lacks the headline"
        }
      }
      return (run.status, run.stderr, findings, summary ?? [:])
    }

    func write(_ pushes: [Push], to name: String) -> String {
      let path = dir + "/" + name
      let text = pushes.map(\.line).joined(separator: "\n") + "\n"
      #expect(FileManager.default.createFile(atPath: path, contents: Data(text.utf8)))
      return path
    }
  }

  static func keys(_ findings: [[String: Any]]) -> [Key] {
    findings.map {
      Key(
        kind: $0["kind"] as! String, message: $0["message"] as! String,
        user: $0["user"] as! String, token: $0["token"] as? String,
        reason: $0["reason"] as? String)
    }
  }

  @Test("the unchanged log, and eval's own gateway files, agree: no finding")
  func unchanged() throws {
    let day = Day()
    #expect(day.pushes.count > 10_000)
    let plain = day.audit([day.write(day.pushes, to: "sent.ndjson")])
    #expect(plain.status == 0, "\(plain.stderr)")
    #expect(plain.findings.isEmpty, "\(plain.findings.prefix(3))")
    #expect(plain.summary["page"] == nil)
    #expect(plain.summary["agree"] as? Int == day.pushes.count)
    #expect(plain.summary["expected"] as? Int == day.pushes.count)
    #expect((plain.summary["log"] as? [String: Any])?["order"] as? String == "traffic")
    let own = day.audit(day.gatewayFiles)
    #expect(own.status == 0, "\(own.stderr)")
    #expect(own.findings.isEmpty, "\(own.findings.prefix(3))")
    #expect(own.summary["agree"] as? Int == day.pushes.count)
    // Each gateway file is in traffic order: read side by side, not sorted.
    #expect((own.summary["log"] as? [String: Any])?["order"] as? String == "traffic")
  }

  @Test(
    "contract v3 days (notification groups on), with and without a throttle: eval's own files agree",
    arguments: [true, false])
  func contractV3(throttle: Bool) throws {
    let day = Day(
      contract: "--v3", sql: throttle ? nil : "DELETE FROM settings WHERE key LIKE 'throttle%'")
    #expect(day.pushes.count > 10_000)
    #expect(day.decisions.contains { $0["reason"] as? String == "throttled" } == throttle)
    let own = day.audit(day.gatewayFiles)
    #expect(own.status == 0, "\(own.stderr)")
    #expect(own.findings.isEmpty, "\(own.findings.prefix(3))")
    #expect(own.summary["agree"] as? Int == day.pushes.count)
  }

  @Test("injected faults are found exactly, by kind and reason, in order or shuffled, any threads")
  func injectedFaults() throws {
    let day = Day()
    var pushes = day.pushes
    var expected: [Key] = []
    func key(_ kind: String, _ p: Push, reason: String? = nil) -> Key {
      Key(kind: kind, message: p.message, user: p.user, token: p.token, reason: reason)
    }
    // Missed: three pushes dropped.
    for k in [5_000, 3_000, 1_000] {
      expected.append(key("missed", pushes[k]))
      pushes.remove(at: k)
    }
    // Early: deferred pairs sent at the message's time (during quiet hours).
    let taken: Set<Int> = [400, 600, 601, 800, 801]
    let deferred = pushes.indices.filter { pushes[$0].deferred && !taken.contains($0) }.prefix(2)
    #expect(deferred.count == 2)
    for k in deferred {
      pushes[k].sentAt = pushes[k].ts
      expected.append(key("early", pushes[k]))
    }
    // Late: ten minutes after its delivery time.
    pushes[400].sentAt! += 600_000
    expected.append(key("late", pushes[400]))
    // Wrong device: another user's token; the right device is then missed.
    let victim = pushes[600]
    pushes[600].token = pushes[601].user == victim.user ? "no-such-token" : pushes[601].token
    expected.append(key("wrong_device", pushes[600], reason: "not_users_device"))
    expected.append(key("missed", victim))
    // Duplicate: a push sent twice.
    pushes.insert(pushes[800], at: 801)
    expected.append(key("duplicate", pushes[800]))
    // Spurious: pairs the rules suppress for DND, an opt-out and the
    // throttle (rule 8, which completes the ledgers' pass).
    for reason in ["dnd", "opted_out", "throttled"] {
      let decision = try #require(day.decisions.first { $0["reason"] as? String == reason })
      let message = decision["message"] as! String
      let order = try #require(
        readText(day.traffic).split(separator: "\n").firstIndex {
          $0.contains("\"id\":\"\(message)\"")
        })
      let push = Push(
        message: message, user: decision["user"] as! String, gateway: "apns",
        token: "tok-\(reason)", sentAt: nil, ts: 0, deferred: false, order: order)
      pushes.append(push)
      expected.append(key("spurious", push, reason: reason))
    }
    // Unknown message.
    let unknown = Push(
      message: "no-such-message", user: pushes[0].user, gateway: "apns", token: pushes[0].token,
      sentAt: nil, ts: 0, deferred: false, order: 2_000)
    pushes.append(unknown)
    expected.append(key("unknown_message", unknown))
    // In traffic order (a stable sort keeps each message's pushes as they were).
    pushes = pushes.enumerated().sorted {
      ($0.element.order, $0.offset) < ($1.element.order, $1.offset)
    }
    .map(\.element)

    let inOrder = day.audit([day.write(pushes, to: "faulty.ndjson")], threads: 1)
    #expect(inOrder.status == 0, "\(inOrder.stderr)")
    #expect(Set(Self.keys(inOrder.findings)) == Set(expected))
    #expect(inOrder.summary["page"] == nil)
    #expect(inOrder.findings.count == expected.count)
    #expect((inOrder.summary["log"] as? [String: Any])?["order"] as? String == "traffic")
    let counts = inOrder.summary["findings"] as? [String: Int]
    #expect(counts?["missed"] == 4 && counts?["spurious"] == 3 && counts?["early"] == 2)
    #expect((inOrder.summary["spurious"] as? [String: Int])?["dnd"] == 1)
    #expect((inOrder.summary["spurious"] as? [String: Int])?["throttled"] == 1)
    // Findings in traffic order: lines never go down (unknown messages last).
    let lines = inOrder.findings.compactMap { $0["line"] as? Int }
    #expect(lines == lines.sorted())
    #expect(inOrder.findings.last?["kind"] as? String == "unknown_message")
    let headline = try #require(inOrder.summary["headline"] as? String)
    #expect(headline.contains("4 missed") && headline.contains("3 spurious"), "\(headline)")
    let command = try #require(inOrder.findings.first?["explain"] as? String)
    #expect(
      command.hasPrefix("fanout explain --snapshot \(day.snapshot) --messages \(day.traffic)"))

    var shuffled = pushes
    var rng = SystemRandomNumberGenerator()
    shuffled.shuffle(using: &rng)
    let sorted = day.audit([day.write(shuffled, to: "shuffled.ndjson")], threads: 2)
    #expect(sorted.status == 0, "\(sorted.stderr)")
    #expect(sorted.stderr.contains("not in traffic order"), "\(sorted.stderr)")
    #expect((sorted.summary["log"] as? [String: Any])?["order"] as? String == "sorted")
    #expect(Set(Self.keys(sorted.findings)) == Set(expected))
    #expect(sorted.findings.count == expected.count)
    let exit = day.audit([day.write(pushes, to: "again.ndjson")], ["--fail-on", "late,duplicate"])
    #expect(exit.status == 1, "\(exit.stderr)")
    let clean = day.audit([day.write(day.pushes, to: "clean.ndjson")], ["--fail-on", "missed"])
    #expect(clean.status == 0, "\(clean.stderr)")
  }

  @Test("a log of another traffic file is reported as unknown messages, with a warning")
  func anotherTraffic() throws {
    let day = Day()
    let other = day.pushes.prefix(500).map {
      var p = $0
      p.message = "other-" + p.message
      return p
    }
    let run = day.audit([day.write(Array(other), to: "other.ndjson")])
    #expect(run.status == 0, "\(run.stderr)")
    #expect(run.stderr.contains("another traffic file"), "\(run.stderr)")
    let counts = run.summary["findings"] as? [String: Int]
    #expect(counts?["unknown_message"] == 500)
    #expect(counts?["missed"] == day.pushes.count)
  }

  @Test("unreadable log lines are reported with file and line, and skipped")
  func unreadableLines() throws {
    let day = Day()
    var text = day.pushes.prefix(20).map(\.line)
    text.insert("{not json", at: 3)
    text.insert(#"{"message":"g1","gateway":"apns","token":"t"}"#, at: 7)
    text.insert(#"{"message":"g1","user":"u1","gateway":"apns"}"#, at: 9)
    text.insert(#"{"message":"g1","user":"u1","device":1.5}"#, at: 11)
    // A key given twice counts as its last value, `recipients` too.
    text.insert(
      #"{"message":"g1","recipients":[{"user":"u1","device":1}],"recipients":"x"}"#, at: 13)
    let path = day.dir + "/bad.ndjson"
    #expect(
      FileManager.default.createFile(
        atPath: path, contents: Data((text.joined(separator: "\n") + "\n").utf8)))
    let (run, out) = day.run([path])
    #expect(run.status == 0, "\(run.stderr)")
    let unreadable = readText(out + "/unreadable.ndjson").split(separator: "\n")
      .compactMap(decodeRecord)
    #expect(unreadable.map { $0["line"] as? Int } == [4, 8, 10, 12, 14])
    #expect(unreadable.allSatisfy { $0["file"] as? String == path })
    #expect((unreadable[1]["error"] as? String)?.contains("user") == true)
    #expect((unreadable[2]["error"] as? String)?.contains("token") == true)
    #expect(unreadable.last?["error"] as? String == "field 'recipients' is not an array")
    #expect(run.stderr.contains("5 sent log lines unreadable"), "\(run.stderr)")
  }

  @Test(
    "a damaged LZ4 log (cut short, a byte changed) stops the audit with its path, nothing written")
  func damagedCompressedLog() throws {
    let day = Day()
    let plain = day.write(Array(day.pushes.prefix(2_000)), to: "sent.ndjson")
    let compressed = day.dir + "/sent.ndjson.lz4"
    let tool = runProcess("/usr/bin/lz4", ["-q", "-f", plain, compressed])
    #expect(tool.status == 0, "\(tool.stderr)")
    let bytes = try Data(contentsOf: URL(fileURLWithPath: compressed))
    var changed = bytes
    changed[bytes.count / 2] ^= 0x5A
    let damaged = [
      ("cut.ndjson.lz4", bytes.prefix(bytes.count - 9), "truncated LZ4 frame"),
      ("changed.ndjson.lz4", changed, "not an LZ4 frame"),
    ]
    for (name, data, reason) in damaged {
      let path = day.dir + "/" + name
      #expect(FileManager.default.createFile(atPath: path, contents: Data(data)))
      let (run, out) = day.run([path])
      #expect(run.status == 66, "\(name): \(run.stderr)")
      #expect(run.stderr.contains(path) && run.stderr.contains(reason), "\(run.stderr)")
      #expect(!FileManager.default.fileExists(atPath: out), "\(listDirectory(out))")
    }
    // The whole file, for contrast, is audited.
    let whole = day.run([compressed]).run
    #expect(whole.status == 0, "\(whole.stderr)")
  }

  @Test(
    "a second run into the same folder is refused unless --overwrite; a full disk leaves nothing")
  func outputFolder() throws {
    let day = Day()
    let log = day.write(Array(day.pushes.prefix(200)), to: "some.ndjson")
    let out = makeTemporaryDirectory() + "/audit"
    let args = [
      "audit", "--snapshot", day.snapshot, "--messages", day.traffic, "--sent", log, "--out", out,
    ]
    #expect(runProcess(fanoutExecutable, args).status == 0)
    let first = readText(out + "/audit.json")
    let again = runProcess(fanoutExecutable, args)
    #expect(again.status == 64 && again.stderr.contains("not empty"), "\(again.stderr)")
    #expect(readText(out + "/audit.json") == first)
    let overwritten = runProcess(fanoutExecutable, args + ["--overwrite"])
    #expect(overwritten.status == 0, "\(overwritten.stderr)")
    #expect(readText(out + "/audit.json") == first)  // the same inputs, the same bytes
    #expect(
      listDirectory(out) == [
        "audit.json", "findings.ndjson.lz4", "rejected.ndjson", "report.html", "unreadable.ndjson",
      ])
    guard let disk = SmallDisk(bytes: 64 << 10) else { return }  // (it printed why)
    defer { disk.unmount() }
    let full = runProcess(
      fanoutExecutable,
      [
        "audit", "--snapshot", day.snapshot, "--messages", day.traffic, "--sent", log, "--out",
        disk.path + "/a",
      ])
    #expect(full.status == 73, "\(full.stderr)")
    #expect(
      !FileManager.default.fileExists(atPath: disk.path + "/a"), "\(listDirectory(disk.path))")
  }

  @Test(
    "bad command lines: no log, a bad --fail-on kind, traffic from standard input, a log given twice"
  )
  func badCommandLines() throws {
    let day = Day()
    let out = makeTemporaryDirectory() + "/audit"
    let base = ["audit", "--snapshot", day.snapshot, "--out", out]
    let kind = runProcess(
      fanoutExecutable,
      base + ["--messages", day.traffic, "--sent", day.traffic, "--fail-on", "missed,nope"])
    #expect(kind.status == 64 && kind.stderr.contains("nope"), "\(kind.stderr)")
    let stdin = runProcess(fanoutExecutable, base + ["--messages", "-", "--sent", day.traffic])
    #expect(stdin.status == 64 && stdin.stderr.contains("twice"), "\(stdin.stderr)")
    let missing = runProcess(
      fanoutExecutable, base + ["--messages", day.traffic, "--sent", day.dir + "/nope.ndjson"])
    #expect(missing.status == 66, "\(missing.stderr)")
    // The same log twice, the second time through a link: every push in
    // it would be a duplicate.
    let link = day.dir + "/again.ndjson.lz4"
    #expect(symlink(day.dir + "/eval/apns.ndjson.lz4", link) == 0)
    let twice = runProcess(
      fanoutExecutable,
      base + ["--messages", day.traffic, "--sent", day.dir + "/eval/apns.ndjson.lz4", link])
    #expect(twice.status == 64, "\(twice.stderr)")
    #expect(twice.stderr.contains("is the log '\(day.dir)/eval/apns.ndjson.lz4' again"))
    #expect(!FileManager.default.fileExists(atPath: out + "/audit.json"))
  }
}
