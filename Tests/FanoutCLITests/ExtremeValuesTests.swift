import FanoutTestSupport
import Foundation
import Testing

/// Arithmetic never traps on input: the extremes of Int64 that a snapshot
/// or a traffic line may hold go through every command.
@Suite("Extreme values through every command")
struct ExtremeValuesTests {
  static let extremes: [Int64] = [.min, .min + 1, -1, 0, .max - 1, .max]

  @Test(
    "Int64's extremes in snooze windows, timestamps and rowids (v2: deferral, presence, sizes): no command traps",
    arguments: [false, true])
  func noTraps(v2: Bool) throws {
    var sql = SQLiteFixture.header
    sql +=
      v2
      ? """
      INSERT INTO channels (channel_id, kind, member_count) VALUES ('c', 'group', 9223372036854775807);
      INSERT INTO settings VALUES ('default_quiet_action', 'defer'), ('presence_action', 'delay'),
        ('presence_delay_ms', '604800000'), ('mention_all_max_members', '9223372036854775807'),
        ('large_channel_members', '9223372036854775806'), ('large_channel_level', 'none');

      """
      : "INSERT INTO channels VALUES ('c', 'group');\n"
    for (i, start) in Self.extremes.enumerated() {
      let until = Self.extremes[(i + 3) % Self.extremes.count]
      let zone = ["UTC", "America/New_York", "Asia/Kolkata", "Pacific/Kiritimati"][i % 4]
      sql += """
        INSERT INTO users (user_id, timezone, snooze_start, snooze_until, dnd_start, dnd_end)
          VALUES ('u\(i)', '\(zone)', \(start), \(until), \(i * 200), \(1439 - i * 100));
        INSERT INTO scope_prefs (user_id, scope, snooze_start, snooze_until)
          VALUES ('u\(i)', 'group', \(until), \(start));
        INSERT INTO channel_prefs (user_id, channel_id, snooze_until) VALUES ('u\(i)', 'c', \(start));
        INSERT INTO members (rowid, channel_id, user_id) VALUES (\(start), 'c', 'u\(i)');
        INSERT INTO devices (user_id, gateway, token) VALUES ('u\(i)', 'apns', 't\(i)');

        """
      if v2 {
        sql += """
          INSERT INTO presence VALUES ('u\(i)', \(start), \(until)), ('u\(i)', \(until), \(start));
          INSERT INTO thread_prefs VALUES ('u\(i)', 'c', 't', 'all');
          INSERT INTO user_mutes VALUES ('u\(i)', 'u\((i + 1) % Self.extremes.count)');

          """
      }
    }
    let snapshot = SQLiteFixture.make(
      sql, schema: v2 ? SQLiteFixture.v2Schema : SQLiteFixture.schema)
    let lines = Self.extremes.enumerated().map { i, ts in
      #"{"id":"m\#(i)","channel":"c","sender":"u\#(i % 2)","ts":\#(ts),"force":\#(i % 3 == 0)"#
        + (v2 ? #","mention_all":true,"thread":"t","silent":\#(i == 4)}"# : "}")
    }
    let traffic = makeTemporaryDirectory() + "/traffic.ndjson"
    try lines.joined(separator: "\n").write(toFile: traffic, atomically: true, encoding: .utf8)

    func run(_ arguments: [String]) {
      let result = runProcess(fanoutExecutable, arguments)
      #expect(result.status == 0, "\(arguments): \(result.stderr.suffix(600))")
    }
    run(["snapshot", "check", snapshot])
    let out = makeTemporaryDirectory()
    run([
      "eval", "--snapshot", snapshot, "--messages", traffic, "--out", out + "/eval", "--decisions",
    ])
    run([
      "whatif", "--snapshot", snapshot, "--messages", traffic, "--out", out + "/whatif", "--sql",
      "UPDATE users SET snooze_until = 9223372036854775807",
    ])
    // A sent log with the extremes as send times, beside eval's own files.
    let sent = out + "/sent.ndjson"
    try Self.extremes.enumerated().map { i, at in
      #"{"message":"m\#(i)","user":"u\#((i + 1) % Self.extremes.count)","gateway":"apns","token":"t\#(i)","sent_at":\#(at)}"#
    }.joined(separator: "\n").write(toFile: sent, atomically: true, encoding: .utf8)
    let gatewayFiles = listDirectory(out + "/eval").filter {
      $0.hasSuffix(".ndjson.lz4") && $0 != "decisions.ndjson.lz4"
    }.map { out + "/eval/" + $0 }
    run(
      ["audit", "--snapshot", snapshot, "--messages", traffic, "--sent", sent] + gatewayFiles
        + ["--out", out + "/audit", "--tolerance-ms", "9223372036854775807"])
    run([
      "audit", "--snapshot", snapshot, "--messages", traffic, "--sent", sent, "--out",
      out + "/audit0",
    ])
    for user in 0..<Self.extremes.count {
      run(["prefs", "get", "--snapshot", snapshot, "--user", "u\(user)"])
      run([
        "prefs", "get", "--snapshot", snapshot, "--user", "u\(user)", "--channel", "c", "--json",
      ])
      for line in lines {
        run(["explain", "--snapshot", snapshot, "--user", "u\(user)", "--message", line])
        run(["explain", "--snapshot", snapshot, "--user", "u\(user)", "--message", line, "--json"])
      }
    }
  }

  @Test("explain: a presence delay past Int64's end is the end, as eval delivers it, not wrapped")
  func explainPresenceDelayAtTheEnd() throws {
    let snapshot = SQLiteFixture.make(
      SQLiteFixture.header + """
        INSERT INTO channels (channel_id, kind) VALUES ('c', 'group');
        INSERT INTO users (user_id) VALUES ('a'), ('b');
        INSERT INTO members (channel_id, user_id) VALUES ('c', 'a'), ('c', 'b');
        INSERT INTO devices (user_id, gateway, token) VALUES ('b', 'apns', 'tb');
        INSERT INTO settings VALUES ('presence_action', 'delay'), ('presence_delay_ms', '604800000');
        INSERT INTO presence VALUES ('b', -9223372036854775808, 9223372036854775807);
        """, schema: SQLiteFixture.v2Schema)
    let line = #"{"id":"m","channel":"c","sender":"a","ts":9223372036854775000}"#
    let traffic = makeTemporaryDirectory() + "/traffic.ndjson"
    try line.write(toFile: traffic, atomically: true, encoding: .utf8)
    let out = makeTemporaryDirectory() + "/eval"
    let eval = runProcess(
      fanoutExecutable,
      ["eval", "--snapshot", snapshot, "--messages", traffic, "--out", out, "--decisions"])
    #expect(eval.status == 0, "\(eval.stderr)")
    let decisions = lz4CommandLineDecode(out + "/decisions.ndjson.lz4") ?? ""
    #expect(decisions.contains(#""deliver_at":9223372036854775807"#), "\(decisions)")
    let explain = runProcess(
      fanoutExecutable, ["explain", "--snapshot", snapshot, "--user", "b", "--message", line])
    #expect(explain.status == 0, "\(explain.stderr)")
    #expect(
      explain.text.contains("delayed by 604800000 ms to 9223372036854775807 "),
      "\(explain.text)")
  }

  @Test("audit: early and late across Int64's whole range, without wrapping around")
  func auditTimesAtTheEnds() throws {
    let snapshot = SQLiteFixture.make(
      SQLiteFixture.header + """
        INSERT INTO channels VALUES ('c', 'group');
        INSERT INTO users (user_id) VALUES ('a'), ('b');
        INSERT INTO members (channel_id, user_id) VALUES ('c', 'a'), ('c', 'b');
        INSERT INTO devices (user_id, gateway, token) VALUES ('b', 'apns', 'tb');
        """)
    let times: [Int64] = [.min, .max, .min + 1, .max - 1]
    let dir = makeTemporaryDirectory()
    let traffic = dir + "/traffic.ndjson"
    try times.enumerated().map { i, ts in #"{"id":"m\#(i)","channel":"c","sender":"a","ts":\#(ts)}"#
    }
    .joined(separator: "\n").write(toFile: traffic, atomically: true, encoding: .utf8)
    func audit(_ sent: String) throws -> [String] {
      let out = dir + "/audit-" + String(sent.hashValue.magnitude)
      let run = runProcess(
        fanoutExecutable,
        ["audit", "--snapshot", snapshot, "--messages", traffic, "--sent", sent, "--out", out])
      #expect(run.status == 0, "\(run.stderr)")
      return (lz4CommandLineDecode(out + "/findings.ndjson.lz4") ?? "").split(separator: "\n")
        .compactMap(decodeRecord).map { "\($0["kind"]!) \($0["message"]!)" }
    }
    // eval's own lines: each sent at its delivery time, at the ends too.
    let eval = runProcess(
      fanoutExecutable,
      ["eval", "--snapshot", snapshot, "--messages", traffic, "--out", dir + "/eval"])
    #expect(eval.status == 0, "\(eval.stderr)")
    #expect(try audit(dir + "/eval/apns.ndjson.lz4") == [])
    // Sent at the other end of the range: late, early; 1 ms off: on time.
    let sent = dir + "/sent.ndjson"
    try zip(times, [Int64.max, .min, .min, .max]).enumerated().map { i, pair in
      #"{"message":"m\#(i)","user":"b","gateway":"apns","token":"tb","sent_at":\#(pair.1)}"#
    }.joined(separator: "\n").write(toFile: sent, atomically: true, encoding: .utf8)
    #expect(try audit(sent) == ["late m0", "early m1"])
  }
}
