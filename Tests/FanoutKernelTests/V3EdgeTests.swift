import FanoutPipeline
import FanoutTestSupport
import Foundation
import Testing

/// The edges of contract v3's section 6.3, one small world each, through
/// `fanout eval`'s pipeline.
@Suite("Contract v3: the edges of section 6.3")
struct V3EdgeTests {
  /// Users a, b and s (the sender), each with one device; channels g1, g2,
  /// g3 of all three; `settings` added.
  static func snapshot(_ settings: String, extra: String = "") -> String {
    SQLiteFixture.make(
      SQLiteFixture.header + """
        INSERT INTO users (user_id) VALUES ('a'), ('b'), ('s');
        INSERT INTO channels (channel_id, kind) VALUES ('g1', 'group'), ('g2', 'group'), ('g3', 'group');
        INSERT INTO members SELECT c.channel_id, u.user_id FROM channels c, users u;
        INSERT INTO devices VALUES (1, 'a', 'apns', 'ta'), (2, 'b', 'fcm', 'tb'), (3, 's', 'fcm', 'ts');
        \(settings)
        \(extra)
        """, schema: SQLiteFixture.v2Schema)
  }

  static let groupsOn = "INSERT INTO settings VALUES ('notification_groups', 'on');"

  struct Outcome {
    /// `message/user` → `group,notification,badge,hide` for delivered pairs,
    /// `-reason` for the others (a repeated id's pairs joined by ` `).
    var pairs: [String: String] = [:]
    var updates: [String] = []
    var summary: [String: Any] = [:]
    var files: [String] = []
  }

  static func eval(_ snapshot: String, _ traffic: [String], threads: Int = 2) throws -> Outcome {
    let folder = makeTemporaryDirectory("fanout-v3-edge")
    let path = folder + "/t.ndjson"
    try (traffic.joined(separator: "\n") + "\n").write(
      toFile: path, atomically: true, encoding: .utf8)
    var options = EvalOptions(
      snapshot: snapshot, messages: path, out: folder + "/out", decisions: true,
      threads: threads)
    options.indexCache = nil
    _ = try Pipeline.eval(options)
    var outcome = Outcome()
    func lines(_ name: String) -> [[String: Any]] {
      guard let data = FileManager.default.contents(atPath: folder + "/out/" + name) else {
        return []
      }
      return (decodeLZ4Frames(Array(data)) ?? []).split(separator: UInt8(ascii: "\n")).map {
        try! JSONSerialization.jsonObject(with: Data($0)) as! [String: Any]
      }
    }
    for d in lines("decisions.ndjson.lz4") {
      let key = "\(d["message"]!)/\(d["user"]!)"
      let value =
        !(d["deliver"] as! Bool)
        ? "-\(d["reason"]!)"
        : d["group"] == nil
          ? "delivered"
          : "\(d["group"]!),\(d["notification"]!),\(d["badge"]!),\((d["hide"] as? [Int]) ?? [])"
      outcome.pairs[key] = outcome.pairs[key].map { $0 + " " + value } ?? value
    }
    outcome.updates = lines("updates.ndjson.lz4").map {
      "\($0["line"]!) \($0["id"]!) \($0["user"]!) \($0["channel"]!) \($0["removed"] as! [Int]) \($0["cancelled"] as! [Int]) \($0["badge"]!)"
    }
    outcome.summary =
      try JSONSerialization.jsonObject(
        with: FileManager.default.contents(atPath: folder + "/out/summary.json")!)
      as! [String: Any]
    outcome.files = listDirectory(folder + "/out")
    return outcome
  }

  static func message(
    _ id: String, _ channel: String, ts: Int, _ extra: String = ""
  ) -> String {
    #"{"id":"\#(id)","channel":"\#(channel)","sender":"s","ts":\#(ts)\#(extra)}"#
  }

  static func read(_ id: String, _ channel: String, user: String, ts: Int) -> String {
    #"{"id":"\#(id)","event":"read","channel":"\#(channel)","user":"\#(user)","ts":\#(ts)}"#
  }

  @Test("ids per user in input order; the group by trigger (pinned with mentions, calls apart)")
  func idsAndGroups() throws {
    let run = try Self.eval(
      Self.snapshot(Self.groupsOn),
      [
        Self.message("m1", "g1", ts: 30),
        Self.message("m2", "g1", ts: 10, #","mentions":["a"]"#),
        Self.message("m3", "g1", ts: 20, #","kind":"pinned""#),
        Self.message("m4", "g1", ts: 40, #","kind":"call""#),
        Self.message("m5", "g2", ts: 5),
      ])
    #expect(run.pairs["m1/a"] == "1,1,1,[]")
    #expect(run.pairs["m2/a"] == "2,2,2,[]")  // a mention: a new group, in input order
    #expect(run.pairs["m2/b"] == "1,2,2,[]")  // b was not mentioned: the messages group
    #expect(run.pairs["m3/a"] == "2,3,3,[]")  // pinned joins the mentions group
    #expect(run.pairs["m4/a"] == "3,4,4,[]")
    #expect(run.pairs["m5/a"] == "4,5,5,[]")  // another channel, another group
    #expect(run.pairs["m5/b"] == "4,5,5,[]")
    #expect(run.files.contains("updates.ndjson.lz4"))
  }

  @Test("the size cap hides the group's oldest visible notifications")
  func sizeCap() throws {
    let run = try Self.eval(
      Self.snapshot(
        Self.groupsOn + "INSERT INTO settings VALUES ('notification_group_size_max', '2');"),
      (1...4).map { Self.message("m\($0)", "g1", ts: $0) })
    #expect(run.pairs["m2/a"] == "1,2,2,[]")
    #expect(run.pairs["m3/a"] == "1,3,3,[1]")
    #expect(run.pairs["m4/a"] == "1,4,4,[2]")
    #expect((run.summary["notifications"] as! [String: Int])["hidden"] == 4)  // a's and b's
  }

  @Test(
    "the count cap hides the other group whose newest visible notification is oldest, never the current one; both caps in one step"
  )
  func countCap() throws {
    let run = try Self.eval(
      Self.snapshot(
        Self.groupsOn
          + "INSERT INTO settings VALUES ('notification_group_count_max', '2'), ('notification_group_size_max', '2');"
      ),
      [
        Self.message("m1", "g1", ts: 1),
        Self.message("m2", "g2", ts: 2),
        Self.message("m3", "g1", ts: 3),  // g1's newest is now 3, g2's 2
        Self.message("m4", "g3", ts: 4),  // three groups: g2 (newest 2) goes
        Self.message("m5", "g3", ts: 5),
        Self.message("m6", "g3", ts: 6),  // size: 4 goes; count: 2 groups, none
        Self.message("m7", "g2", ts: 7),  // g2 again: g1 (newest 3) goes, whole
      ])
    #expect(run.pairs["m4/a"] == "3,4,4,[2]")
    #expect(run.pairs["m6/a"] == "3,6,6,[4]")
    #expect(run.pairs["m7/a"] == "2,7,7,[1, 3]")
    // One group only, the current one, never hides itself.
    let one = try Self.eval(
      Self.snapshot(
        Self.groupsOn + "INSERT INTO settings VALUES ('notification_group_count_max', '1');"),
      [Self.message("m1", "g1", ts: 1), Self.message("m2", "g1", ts: 2)])
    #expect(one.pairs["m2/a"] == "1,2,2,[]")
  }

  @Test(
    "a read removes earlier lines' unread notifications of its channel with ts at most its own, hidden ones too; the badge counts hidden ones"
  )
  func reads() throws {
    let run = try Self.eval(
      Self.snapshot(
        Self.groupsOn + "INSERT INTO settings VALUES ('notification_group_size_max', '1');"),
      [
        Self.message("m1", "g1", ts: 100),
        Self.message("m2", "g1", ts: 200),  // hides 1; badge 2 (1 is hidden, unread)
        Self.message("m3", "g1", ts: 900),  // later than the read: stays
        Self.message("m4", "g2", ts: 100),  // another channel: stays
        Self.read("r1", "g1", user: "a", ts: 500),
        Self.message("m5", "g1", ts: 150),  // after the read line: not affected
        Self.read("r1", "g1", user: "a", ts: 500),  // the same id again: removes m5's
      ])
    #expect(run.pairs["m2/a"] == "1,2,2,[1]")
    #expect(run.pairs["m5/a"] == "1,5,3,[3]")
    #expect(
      run.updates == [
        "5 r1 a g1 [1, 2] [] 2",
        "7 r1 a g1 [5] [] 2",
      ])
    let counts = run.summary["notifications"] as! [String: Int]
    #expect(counts == ["hidden": 6, "removed": 3, "cancelled": 0, "unread": 7])
    #expect(run.summary["reads"] as? Int == 2)
  }

  @Test(
    "reads of a group far out of ts order (1,100 messages newest first, then more in order) remove exactly those of their ts or older"
  )
  func readsOutOfOrder() throws {
    // Message k of the first n has ts 10·(n − k): newest first, more than
    // the ledger looks back for the newest ts before an append (1,024),
    // so its disorder has no bound until a read looks at all. Then reads,
    // each removing some of the oldest (the newest ids), messages in ts
    // order, and reads again.
    let n = 1_100
    let later = 10 * n + 1_000
    var traffic = (0..<n).map { Self.message("m\($0)", "g1", ts: 10 * (n - $0)) }
    var ts = (0..<n).map { 10 * (n - $0) }
    var expected: [String] = []
    var unread = Array(1...n)
    func read(at t: Int) {
      traffic.append(Self.read("r\(t)", "g1", user: "a", ts: t))
      let removed = unread.filter { ts[$0 - 1] <= t }
      unread.removeAll { ts[$0 - 1] <= t }
      if !removed.isEmpty {
        expected.append("\(traffic.count) r\(t) a g1 \(removed) [] \(unread.count)")
      }
    }
    for t in [55, 200, 201, 480] { read(at: t) }
    for k in n..<(n + 40) {
      traffic.append(Self.message("m\(k)", "g1", ts: later + 10 * (k - n)))
      ts.append(later + 10 * (k - n))
      unread.append(k + 1)
    }
    for t in [700, later + 5, later + 200, 10 * later] { read(at: t) }
    let run = try Self.eval(Self.snapshot(Self.groupsOn), traffic)
    #expect(run.updates == expected)
    #expect(expected.count == 7)  // r201 removes none
  }

  @Test("reads and messages at both ends of ts's range, out of order: as the rule reads")
  func readsAtTheEnds() throws {
    let (min, max) = (Int(Int64.min), Int(Int64.max))
    let run = try Self.eval(
      Self.snapshot(Self.groupsOn),
      [
        Self.message("m1", "g1", ts: max),
        Self.message("m2", "g1", ts: min),  // a span no slack covers
        Self.message("m3", "g1", ts: 0),
        Self.message("m4", "g1", ts: max - 1),
        Self.read("r1", "g1", user: "a", ts: min),
        Self.message("m5", "g1", ts: -5),
        Self.read("r2", "g1", user: "a", ts: 0),
        Self.message("m6", "g1", ts: min + 1),
        Self.read("r3", "g1", user: "a", ts: max - 1),
        Self.message("m7", "g1", ts: max),
        Self.read("r4", "g1", user: "a", ts: max),
      ])
    #expect(
      run.updates == [
        "5 r1 a g1 [2] [] 3", "7 r2 a g1 [3, 5] [] 2", "9 r3 a g1 [4, 6] [] 1",
        "11 r4 a g1 [1, 7] [] 0",
      ])
  }

  @Test("cancelled exactly when the delivery time is later than the read")
  func cancellation() throws {
    let presence = """
      INSERT INTO settings VALUES ('presence_action', 'delay'), ('presence_delay_ms', '1000');
      INSERT INTO presence VALUES ('a', 0, 100000);
      """
    let run = try Self.eval(
      Self.snapshot(Self.groupsOn, extra: presence),
      [
        Self.message("m1", "g1", ts: 5000),  // due 6000
        Self.message("m2", "g1", ts: 5500),  // due 6500
        Self.read("r1", "g1", user: "a", ts: 6000),  // m1 due at the read: sent, not cancelled
        Self.message("m3", "g2", ts: 7000),  // due 8000
        Self.read("r2", "g2", user: "a", ts: 7999),
      ])
    #expect(run.updates == ["3 r1 a g1 [1, 2] [2] 0", "5 r2 a g2 [3] [3] 0"])
  }

  @Test("reads by a non-member or an unknown user have no effect, and count")
  func strangers() throws {
    let run = try Self.eval(
      Self.snapshot(Self.groupsOn, extra: "INSERT INTO users (user_id) VALUES ('x');"),
      [
        Self.message("m1", "g1", ts: 1),
        Self.read("r1", "g1", user: "x", ts: 9),
        Self.read("r2", "g1", user: "ghost", ts: 9),
        Self.message("m2", "g1", ts: 2),
      ])
    #expect(run.updates.isEmpty)
    #expect(run.pairs["m2/a"] == "1,2,2,[]")
    #expect(run.summary["reads"] as? Int == 2)
    #expect(run.summary["messages"] as? Int == 2)
  }

  @Test("throttled, suppressed and silent pairs take no notification id")
  func undeliveredTakeNoID() throws {
    let run = try Self.eval(
      Self.snapshot(
        Self.groupsOn
          + "INSERT INTO settings VALUES ('throttle_messages', '1'), ('throttle_window_ms', '1000');",
        extra: "INSERT INTO user_mutes VALUES ('b', 's');"),
      [
        Self.message("m1", "g1", ts: 1),
        Self.message("m2", "g1", ts: 2),  // throttled for a
        Self.message("m3", "g1", ts: 3, #","silent":true"#),
        Self.message("m4", "g1", ts: 4, #","mentions":["a"]"#),  // a mention: never throttled
        Self.message("m1", "g2", ts: 5),  // a repeated id: its own pairs
      ])
    #expect(run.pairs["m1/a"] == "1,1,1,[] 3,3,3,[]")
    #expect(run.pairs["m2/a"] == "-throttled")
    #expect(run.pairs["m3/a"] == "-silent")
    #expect(run.pairs["m4/a"] == "2,2,2,[]")
    #expect(run.pairs["m1/b"] == "-sender_muted -sender_muted")
  }

  @Test("with the groups off: read lines count and do nothing else, and no updates file")
  func off() throws {
    let lines = [
      Self.message("m1", "g1", ts: 1), Self.read("r1", "g1", user: "a", ts: 9),
      Self.message("m2", "g1", ts: 2),
    ]
    let run = try Self.eval(Self.snapshot(""), lines)
    #expect(!run.files.contains("updates.ndjson.lz4"))
    #expect(run.summary["reads"] as? Int == 1)
    #expect(run.summary["notifications"] == nil)
    #expect(run.pairs["m1/a"] == "delivered" && run.pairs["m2/a"] == "delivered")
  }
}
