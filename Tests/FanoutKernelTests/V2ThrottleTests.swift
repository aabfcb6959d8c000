import FanoutIndex
import FanoutKernel
import FanoutSnapshot
import FanoutTestSupport
import Foundation
import Testing

/// Contract v2, rule 8: at most `throttle_messages` 'message' deliveries per
/// user and channel within `throttle_window_ms`, counted over earlier lines
/// in input order. World as in `V2RuleTests` (a sends, b and c receive).
@Suite("Contract v2 throttle (rule 8)")
struct V2ThrottleTests {
  static let minute: Int64 = 60_000
  static let window: Int64 = 10 * minute

  static func throttle(_ messages: Int, _ window: Int64 = Self.window) -> String {
    """
    INSERT INTO settings VALUES ('throttle_messages', '\(messages)'),
      ('throttle_window_ms', '\(window)');

    """
  }

  /// `message/user` outcomes in output order, repeated ids kept apart.
  static func outcomes(_ s: Scenario, user: String) -> [String] {
    String(decoding: s.result.decisionLines, as: UTF8.self).split(separator: "\n").compactMap {
      let line = try! JSONSerialization.jsonObject(with: Data($0.utf8)) as! [String: Any]
      guard line["user"] as? String == user else { return nil }
      return (line["deliver"] as! Bool)
        ? line["trigger"] as! String + ((line["deliver_at"] as? Int).map { "@\($0)" } ?? "")
        : "-" + (line["reason"] as! String)
    }
  }

  @Test("window edges: ts − W is outside, ts itself inside; throttled lines do not count")
  func windowEdges() throws {
    let s = try runV2(
      Self.throttle(1),
      msg("m1", ts: noon), msg("m2", ts: noon + Self.window - 1),
      msg("m3", ts: noon + Self.window), msg("m4", ts: noon + Self.window))
    #expect(Self.outcomes(s, user: "b") == ["message", "-throttled", "message", "-throttled"])
    #expect(Self.outcomes(s, user: "c") == ["message", "-throttled", "message", "-throttled"])
    // The sender forms no pair and is never counted.
    #expect(Self.outcomes(s, user: "a").isEmpty)
  }

  @Test("up to throttle_messages deliveries per window, then throttled")
  func count() throws {
    let s = try runV2(
      Self.throttle(3),
      msg("m0", ts: noon), msg("m1", ts: noon + Self.minute), msg("m2", ts: noon + 2 * Self.minute),
      msg("m3", ts: noon + 3 * Self.minute), msg("m4", ts: noon + 4 * Self.minute),
      msg("m5", ts: noon + 5 * Self.minute))
    #expect(
      Self.outcomes(s, user: "b") == [
        "message", "message", "message", "-throttled", "-throttled", "-throttled",
      ])
    #expect(s.result.counters.suppressed[9] == 6, "\(s.result.counters.suppressed)")
  }

  @Test("mentions, pinned messages and calls are neither throttled nor counted")
  func onlyMessages() throws {
    let s = try runV2(
      Self.throttle(1) + "UPDATE users SET pinned_notifications = 0 WHERE user_id = 'c';",
      msg("m1", ts: noon, #""mentions":["b"]"#), msg("m2", ts: noon + 1, #""kind":"pinned""#),
      msg("m3", ts: noon + 2, #""kind":"call""#), msg("m4", ts: noon + 3),
      msg("m5", ts: noon + 4, #""mentions":["b"]"#), msg("m6", ts: noon + 5, #""kind":"call""#),
      msg("m7", ts: noon + 6), msg("m8", ts: noon + 7, #""kind":"pinned""#))
    #expect(
      Self.outcomes(s, user: "b") == [
        "mention", "pinned", "call", "message", "mention", "call", "-throttled", "pinned",
      ])
    // For c, with pinned_notifications 0: a pinned message is an ordinary message.
    #expect(
      Self.outcomes(s, user: "c") == [
        "message", "-throttled", "call", "-throttled", "-throttled", "call", "-throttled",
        "-throttled",
      ])
  }

  @Test("pairs suppressed by an earlier rule, or with no device, do not count")
  func onlyDelivered() throws {
    let s = try runV2(
      Self.throttle(1) + "DELETE FROM devices WHERE user_id = 'c';",
      msg("m1", ts: noon, #""silent":true"#), msg("m2", ts: noon + 1),
      msg("m3", ts: noon + 2))
    #expect(Self.outcomes(s, user: "b") == ["-silent", "message", "-throttled"])
    #expect(Self.outcomes(s, user: "c") == ["-silent", "-no_device", "-no_device"])
  }

  @Test("a repeated id is another line, and counts")
  func repeatedIDs() throws {
    let s = try runV2(Self.throttle(1), msg("m1", ts: noon), msg("m1", ts: noon))
    #expect(Self.outcomes(s, user: "b") == ["message", "-throttled"])
  }

  @Test(
    "input order, not time order: a later line earlier in time counts only what is before it in time"
  )
  func inputOrder() throws {
    let s = try runV2(
      Self.throttle(2),
      msg("m1", ts: noon + 5 * Self.minute), msg("m2", ts: noon),
      msg("m3", ts: noon + 5 * Self.minute), msg("m4", ts: noon + 1))
    // m2 (noon) counts no m1 (later in time); m3 counts m1 and m2; m4
    // counts m2 only (m1 and m3 are later in time).
    #expect(Self.outcomes(s, user: "b") == ["message", "message", "-throttled", "message"])
  }

  @Test("channels and users are independent")
  func independent() throws {
    let s = try runV2(
      Self.throttle(1),
      msg("m1", channel: "g", ts: noon), msg("m2", channel: "d", ts: noon + 1),
      msg("m3", channel: "g", ts: noon + 2, #""mentions":["c"]"#),
      msg("m4", channel: "d", ts: noon + 3))
    #expect(Self.outcomes(s, user: "b") == ["message", "message", "-throttled", "-throttled"])
    #expect(Self.outcomes(s, user: "c") == ["message", "mention"])
  }

  @Test("deferred pairs count at the line's ts; a throttled pair carries no deliver_at")
  func deferredCount() throws {
    let s = try runV2(
      Self.throttle(1)
        + "UPDATE users SET quiet_action = 'defer', snooze_until = \(noon + 30 * Self.minute) WHERE user_id = 'b';",
      msg("m1", ts: noon), msg("m2", ts: noon + Self.minute))
    #expect(
      Self.outcomes(s, user: "b") == ["message@\(noon + 30 * Self.minute)", "-throttled"])
  }

  @Test("a huge window and extreme times do not trap")
  func extremes() throws {
    let s = try runV2(
      Self.throttle(1, Int64.max),
      msg("m1", ts: Int64.max), msg("m2", ts: 0), msg("m3", ts: Int64.max),
      msg("m4", ts: -1))
    // m4 (−1) counts neither m1 nor m3 (later in time) nor m2 (0 > −1).
    #expect(Self.outcomes(s, user: "b") == ["message", "message", "-throttled", "message"])
  }
}

/// The stream stage's ledger through a snapshot reload: moved to the new
/// index by ids, it gives the verdicts one ledger would have given.
@Suite("Throttle ledger across snapshot reloads")
struct ThrottleReloadTests {
  @Test("re-keyed by user and channel id, where rows and member slots moved")
  func rekeyed() throws {
    let throttle =
      "INSERT INTO settings VALUES ('throttle_messages', '2'), ('throttle_window_ms', '600000');\n"
    let first = try SnapshotLoader.load(
      path: SQLiteFixture.make(
        SQLiteFixture.header + world + throttle, schema: SQLiteFixture.v2Schema)
    ).index
    // New users sort before the old ones: every user row and slot moves.
    let second = try SnapshotLoader.load(
      path: SQLiteFixture.make(
        SQLiteFixture.header + world + throttle + """
          INSERT INTO users (user_id) VALUES ('0'), ('1');
          INSERT INTO channels (channel_id, kind) VALUES ('0g', 'group');
          INSERT INTO members VALUES ('g', '0'), ('g', '1'), ('0g', 'b');
          INSERT INTO devices VALUES (10, '0', 'apns', 't0'), (11, '1', 'apns', 't1');
          """, schema: SQLiteFixture.v2Schema)
    ).index
    let lines = (0..<6).map { msg("m\($0)", ts: noon + Int64($0) * 60_000) }
    func throttledUsers(_ index: Index, _ ledgers: Ledgers, _ lines: ArraySlice<String>)
      -> [[String]]
    {
      let batch = parseTraffic(Array(lines), index: index)
      let judged = ledgers.judge([batch], plan: [(0, 0..<batch.count)]).throttled[0]
      return (0..<batch.count).map { m in judged.users(of: m).map { index.users[Int($0)] } }
    }
    let whole = try #require(Ledgers(index: first, threads: 2))
    let expected = throttledUsers(first, whole, lines[...])
    #expect(expected[2] == ["b", "c"], "\(expected)")

    let before = try #require(Ledgers(index: first, threads: 2))
    let after = try #require(Ledgers(index: second, threads: 3))
    var got = throttledUsers(first, before, lines[0..<2])
    after.inherit(from: before)
    got += throttledUsers(second, after, lines[2...])
    // The new members '0' and '1' start afresh: throttled from their third line.
    #expect(got[0..<2] == expected[0..<2])
    let oldMembers: [[String]] = got[2..<6].map { users in
      users.filter { $0 != "0" && $0 != "1" }
    }
    #expect(oldMembers == Array(expected[2..<6]))
    #expect(got[4] == ["0", "1", "b", "c"], "\(got)")
  }
}
