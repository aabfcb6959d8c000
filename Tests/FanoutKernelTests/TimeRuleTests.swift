import FanoutTestSupport
import Testing

@Suite("Snooze and do-not-disturb")
struct TimeRuleTests {
  @Test("snooze window [start, until) to the millisecond")
  func snoozeEdges() throws {
    let sql =
      "UPDATE users SET snooze_start = \(noon), snooze_until = \(noon + 60_000) WHERE user_id = 'b';"
    let s = try run(
      sql, msg("before", ts: noon - 1), msg("start", ts: noon), msg("last", ts: noon + 59_999),
      msg("until", ts: noon + 60_000))
    #expect(s.outcome("before", "b") == "message")
    #expect(s.outcome("start", "b") == "-snoozed")
    #expect(s.outcome("last", "b") == "-snoozed")
    #expect(s.outcome("until", "b") == "message")
  }

  @Test("NULL start means from the beginning; NULL until means no snooze; start >= until is empty")
  func snoozeNulls() throws {
    let sql = """
      UPDATE users SET snooze_start = NULL, snooze_until = \(noon) WHERE user_id = 'a';
      UPDATE users SET snooze_start = \(noon - 1000), snooze_until = NULL WHERE user_id = 'b';
      UPDATE users SET snooze_start = \(noon), snooze_until = \(noon) WHERE user_id = 'c';
      """
    let s = try run(
      sql, msg(sender: nil, ts: -5_000_000_000_000), msg("later", sender: nil, ts: noon))
    #expect(s.outcome("m", "a") == "-snoozed")
    #expect(s.outcome("later", "a") == "message")
    #expect(s.outcome("later", "b") == "message")
    #expect(s.outcome("later", "c") == "message")
  }

  @Test("windows of user, scope and channel add up, each standing alone")
  func snoozeUnion() throws {
    let sql = """
      UPDATE users SET snooze_start = 1000, snooze_until = 2000 WHERE user_id = 'b';
      INSERT INTO scope_prefs (user_id, scope, snooze_start, snooze_until) VALUES ('b', 'group', 3000, 4000);
      INSERT INTO channel_prefs (user_id, channel_id, snooze_start, snooze_until) VALUES ('b', 'g', NULL, 500);
      INSERT INTO channel_prefs (user_id, channel_id, snooze_start, snooze_until) VALUES ('c', 'g', NULL, NULL);
      UPDATE users SET snooze_start = 1000, snooze_until = 2000 WHERE user_id = 'c';
      """
    let s = try run(
      sql, msg("t0", ts: 0), msg("t1", ts: 1500), msg("t2", ts: 2500), msg("t3", ts: 3500),
      msg("t4", ts: 4500),
      msg("d3", channel: "d", ts: 3500))
    #expect(s.outcome("t0", "b") == "-snoozed")  // channel window, NULL start
    #expect(s.outcome("t1", "b") == "-snoozed")  // user window
    // between windows: NULL channel start did not inherit
    #expect(s.outcome("t2", "b") == "message")
    #expect(s.outcome("t3", "b") == "-snoozed")  // scope window
    #expect(s.outcome("t4", "b") == "message")
    // the group scope does not apply to a direct channel
    #expect(s.outcome("d3", "b") == "message")
    #expect(s.outcome("t1", "c") == "-snoozed")  // a channel row without a window keeps the user's
  }

  @Test("force bypasses snooze and DND, nothing else")
  func force() throws {
    let sql = """
      UPDATE users SET snooze_until = \(noon + 1) WHERE user_id = 'b';
      UPDATE users SET dnd_start = 0, dnd_end = 0, chat_level = 'none' WHERE user_id = 'c';
      """
    let s = try run(sql, msg("normal"), msg("forced", #""force":true"#))
    #expect(s.outcome("normal", "b") == "-snoozed")
    #expect(s.outcome("normal", "c") == "-dnd")
    #expect(s.outcome("forced", "b") == "message")
    #expect(s.outcome("forced", "c") == "-muted")
  }

  @Test("snooze is checked before DND, DND before levels")
  func ruleOrder() throws {
    let sql =
      "UPDATE users SET snooze_until = \(noon + 1), dnd_start = 0, dnd_end = 0, chat_level = 'none' WHERE user_id = 'b';"
      + "UPDATE users SET dnd_start = 0, dnd_end = 0, chat_level = 'none' WHERE user_id = 'c';"
    let s = try run(sql, msg())
    #expect(s.outcome("m", "b") == "-snoozed")
    #expect(s.outcome("m", "c") == "-dnd")
  }

  /// Unix ms of a UTC wall clock on 2026-03-02 (Monday) plus `days`.
  func at(_ hour: Int, _ minute: Int, days: Int = 0) -> Int64 {
    noon - 12 * 3_600_000 + Int64(days * 86_400_000 + hour * 3_600_000 + minute * 60_000)
  }

  @Test("daily window: same day, past midnight, whole day, 23:59 to midnight")
  func dailyWindows() throws {
    let sql = """
      UPDATE users SET dnd_start = 540, dnd_end = 600 WHERE user_id = 'a';
      UPDATE users SET dnd_start = 1320, dnd_end = 420 WHERE user_id = 'b';
      UPDATE users SET dnd_start = 600, dnd_end = 600 WHERE user_id = 'c';
      """
    let times: [(String, Int64)] = [
      ("08:59", at(8, 59)), ("09:00", at(9, 0)), ("09:59", at(9, 59)), ("10:00", at(10, 0)),
      ("21:59", at(21, 59)), ("22:00", at(22, 0)), ("06:59", at(6, 59)), ("07:00", at(7, 0)),
    ]
    let scenario = try Scenario(
      world + sql, messages: times.map { msg($0.0, sender: "nobody", ts: $0.1) })
    let a = times.map { scenario.outcome($0.0, "a")! }
    #expect(
      a == ["message", "-dnd", "-dnd", "message", "message", "message", "message", "message"])
    let b = times.map { scenario.outcome($0.0, "b")! }
    #expect(
      b == ["message", "message", "message", "message", "message", "-dnd", "-dnd", "message"])
    #expect(times.allSatisfy { scenario.outcome($0.0, "c") == "-dnd" })

    let late = "UPDATE users SET dnd_start = 1380, dnd_end = 1439 WHERE user_id = 'a';"
    let t = try Scenario(
      world + late,
      messages: [
        msg("23:58", sender: nil, ts: at(23, 58)),
        msg("23:59", sender: nil, ts: at(23, 59, days: 0) + 59_999),
        msg("00:00", sender: nil, ts: at(0, 0, days: 1)), msg("22:59", sender: nil, ts: at(22, 59)),
      ])
    #expect(t.outcome("23:58", "a") == "-dnd")
    #expect(t.outcome("23:59", "a") == "-dnd")
    #expect(t.outcome("00:00", "a") == "message")
    #expect(t.outcome("22:59", "a") == "message")
  }

  @Test("weekly windows replace the daily one and follow the local weekday")
  func weekly() throws {
    let sql = """
      UPDATE users SET dnd_start = 0, dnd_end = 0 WHERE user_id IN ('a', 'b');
      INSERT INTO dnd_weekly VALUES ('a', 1, 540, 600), ('a', 7, 1200, 1439);
      """
    // 2026-03-02 is a Monday; 2026-03-08 a Sunday.
    let s = try Scenario(
      world + sql,
      messages: [
        msg("mon0930", sender: nil, ts: at(9, 30)), msg("mon1030", sender: nil, ts: at(10, 30)),
        msg("tue0930", sender: nil, ts: at(9, 30, days: 1)),
        msg("sun2359", sender: nil, ts: at(23, 59, days: 6)),
        msg("sun1959", sender: nil, ts: at(19, 59, days: 6)),
      ])
    #expect(s.outcome("mon0930", "a") == "-dnd")
    #expect(s.outcome("mon1030", "a") == "message")  // daily all-day window replaced
    #expect(s.outcome("tue0930", "a") == "message")
    #expect(s.outcome("sun2359", "a") == "-dnd")  // 1439 runs to midnight
    #expect(s.outcome("sun1959", "a") == "message")
    #expect(s.outcome("mon1030", "b") == "-dnd")  // b has no weekly rows: daily applies
  }

  @Test("DND in Asia/Shanghai and across the 2026 New York daylight-saving changes")
  func timeZones() throws {
    let sql = """
      UPDATE users SET timezone = 'Asia/Shanghai', dnd_start = 1320, dnd_end = 420 WHERE user_id = 'a';
      UPDATE users SET timezone = 'America/New_York', dnd_start = 60, dnd_end = 180 WHERE user_id = 'b';
      INSERT INTO users (user_id, timezone) VALUES ('n', 'America/New_York');
      INSERT INTO dnd_weekly VALUES ('n', 7, 60, 180);
      INSERT INTO members VALUES ('g', 'n'); INSERT INTO devices VALUES (9, 'n', 'fcm', 'tn');
      """
    let s = try Scenario(
      world + sql,
      messages: [
        // Shanghai is UTC+8 all year: 14:00Z = 22:00, 13:59Z = 21:59, 22:59Z = 06:59.
        msg("sh1", sender: nil, ts: 1_772_978_400_000),  // 2026-03-08T14:00Z
        msg("sh2", sender: nil, ts: 1_772_978_340_000),  // 13:59Z
        msg("sh3", sender: nil, ts: 1_773_010_740_000),  // 22:59Z
        // 2026-03-08: EST until 07:00Z. 06:30Z = 01:30 EST (in); 07:30Z = 03:30 EDT (out; 02:30 if EST).
        msg("ny1", sender: nil, ts: 1_772_951_400_000),
        msg("ny2", sender: nil, ts: 1_772_955_000_000),
        // 2026-11-01: EDT until 06:00Z. 05:30Z = 01:30 EDT (in); 06:30Z = 01:30 EST (in); 08:00Z = 03:00 EST (out).
        msg("ny3", sender: nil, ts: 1_793_511_000_000),
        msg("ny4", sender: nil, ts: 1_793_514_600_000),
        msg("ny5", sender: nil, ts: 1_793_520_000_000),
        // 2026-11-01 06:59Z = 01:59 EST (in), 2026-11-01 04:59Z = 00:59 EDT (out).
        msg("ny6", sender: nil, ts: 1_793_516_340_000),
        msg("ny7", sender: nil, ts: 1_793_508_740_000),
      ])
    #expect(s.outcome("sh1", "a") == "-dnd")
    #expect(s.outcome("sh2", "a") == "message")
    #expect(s.outcome("sh3", "a") == "-dnd")
    #expect(s.outcome("ny1", "b") == "-dnd")
    #expect(s.outcome("ny2", "b") == "message")
    #expect(s.outcome("ny3", "b") == "-dnd")
    #expect(s.outcome("ny4", "b") == "-dnd")
    #expect(s.outcome("ny5", "b") == "message")
    #expect(s.outcome("ny6", "b") == "-dnd")
    #expect(s.outcome("ny7", "b") == "message")
    // Weekly window on Sunday in New York, both DST days are Sundays.
    #expect(s.outcome("ny1", "n") == "-dnd")
    #expect(s.outcome("ny2", "n") == "message")
    #expect(s.outcome("ny4", "n") == "-dnd")
  }
}
