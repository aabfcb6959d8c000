import FanoutTestSupport
import Testing

/// Contract v2, part 2: deferral to the end of quiet hours and presence, at
/// their edges. The world: users a, b, c; group `g` (a, b, c); `noon` is
/// 2026-03-02T12:00Z, a Monday. Outcomes read `trigger@deliver_at` when
/// deferred.
@Suite("Contract v2 deferral and presence")
struct V2TimeRuleTests {
  /// b in `zone` with a daily DND window, deferring.
  private func deferring(_ zone: String, _ start: Int, _ end: Int, _ extra: String = "") -> String {
    """
    UPDATE users SET timezone = '\(zone)', dnd_start = \(start), dnd_end = \(end),
      quiet_action = 'defer' WHERE user_id = 'b';
    \(extra)
    """
  }

  @Test("New York, spring forward: a window ending at 02:30 ends at the 07:00Z transition")
  func springForward() throws {
    let s = try runV2(deferring("America/New_York", 60, 150), msg(ts: 1_772_951_400_000))
    #expect(s.outcome("m", "b") == "message@1772953200000")
    #expect(s.outcome("m", "c") == "message")
  }

  @Test("New York, fall back: the repeated hour is in the window twice")
  func fallBack() throws {
    let s = try runV2(
      deferring("America/New_York", 60, 90), msg("m1", ts: 1_793_509_800_000),
      msg("m2", ts: 1_793_513_400_000), msg("m3", ts: 1_793_511_600_000))
    #expect(s.outcome("m1", "b") == "message@1793511000000")  // 01:10 EDT → 01:30 EDT
    #expect(s.outcome("m2", "b") == "message@1793514600000")  // 01:10 EST → 01:30 EST
    #expect(s.outcome("m3", "b") == "message")  // 01:40 EDT: outside
  }

  @Test("Kolkata past midnight; Shanghai's 23:59 runs to midnight; a weekly window")
  func zones() throws {
    let kolkata = try runV2(deferring("Asia/Kolkata", 1320, 420), msg(ts: noon + 5 * 3_600_000))
    #expect(kolkata.outcome("m", "b") == "message@1772501400000")  // 22:30 IST → 07:00 IST
    let shanghai = try runV2(
      deferring("Asia/Shanghai", 1320, 1439), msg(ts: noon + 9_000_000))
    #expect(shanghai.outcome("m", "b") == "message@1772467200000")  // 22:30 CST → 00:00
    let weekly = try runV2(
      deferring("UTC", 0, 0, "INSERT INTO dnd_weekly VALUES ('b', 1, 600, 780);"), msg())
    #expect(weekly.outcome("m", "b") == "message@\(noon + 3_600_000)")
  }

  @Test("snooze then DND back to back; all-day DND is never over; calls and force")
  func edges() throws {
    let sql = deferring(
      "UTC", 780, 840,
      "UPDATE users SET snooze_start = \(noon - 3_600_000), snooze_until = \(noon + 3_600_000) WHERE user_id = 'b';"
    )
    let s = try runV2(
      sql, msg("m1"), msg("m2", #""kind":"call""#), msg("m3", #""force":true"#),
      msg("m4", #""mentions":["b"]"#))
    #expect(s.outcome("m1", "b") == "message@\(noon + 2 * 3_600_000)")
    // Calls are never deferred; force is delivered at once.
    #expect(s.outcome("m2", "b") == "-snoozed")
    #expect(s.outcome("m3", "b") == "message")
    // The level rule applies after deferral.
    #expect(s.outcome("m4", "b") == "mention@\(noon + 2 * 3_600_000)")
    let allDay = try runV2(deferring("UTC", 600, 600), msg())
    #expect(allDay.outcome("m", "b") == "-dnd")
    // A deferred pair still meets rule 4: muted stays muted.
    let muted = try runV2(
      deferring("UTC", 600, 780, "UPDATE users SET chat_level = 'none' WHERE user_id = 'b';"),
      msg())
    #expect(muted.outcome("m", "b") == "-muted")
  }

  @Test("the quiet action: the user's, else default_quiet_action, else drop")
  func quietAction() throws {
    let base = "UPDATE users SET dnd_start = 600, dnd_end = 780;"
    let s = try runV2(
      base + """
        INSERT INTO settings VALUES ('default_quiet_action', 'defer');
        UPDATE users SET quiet_action = 'drop' WHERE user_id = 'c';
        """, msg())
    #expect(s.outcome("m", "b") == "message@\(noon + 3_600_000)")
    #expect(s.outcome("m", "c") == "-dnd")
    #expect(try runV2(base, msg()).outcome("m", "b") == "-dnd")
  }

  @Test("presence: [from, until) at ts, suppress or delay, calls exempt, delay against deferral")
  func presence() throws {
    let window = "INSERT INTO presence VALUES ('b', \(noon), \(noon + 60_000));"
    let suppress = try runV2(
      window + "INSERT INTO settings VALUES ('presence_action', 'suppress');", msg("m1"),
      msg("m2", ts: noon + 60_000), msg("m3", ts: noon - 1), msg("m4", #""kind":"call""#),
      msg("m5", #""mentions":["b"]"#))
    #expect(suppress.outcome("m1", "b") == "-active")
    #expect(suppress.outcome("m2", "b") == "message")
    #expect(suppress.outcome("m3", "b") == "message")
    #expect(suppress.outcome("m4", "b") == "call")
    #expect(suppress.outcome("m5", "b") == "-active")
    // Rule 4 comes first.
    let muted = try runV2(
      window
        + "INSERT INTO settings VALUES ('presence_action', 'suppress'); UPDATE users SET chat_level = 'none';",
      msg())
    #expect(muted.outcome("m", "b") == "-muted")

    let delay = try runV2(
      window + "INSERT INTO settings VALUES ('presence_action', 'delay');", msg("m1"),
      msg("m2", #""kind":"call""#))
    #expect(delay.outcome("m1", "b") == "message@\(noon + 120_000)")
    #expect(delay.outcome("m2", "b") == "call")
    // ignore (and no setting) changes nothing.
    #expect(
      try runV2(window + "INSERT INTO settings VALUES ('presence_action', 'ignore');", msg())
        .outcome("m", "b") == "message")
    #expect(try runV2(window, msg()).outcome("m", "b") == "message")

    // The later of deferral and presence delay; presence is judged at ts.
    let both = deferring(
      "UTC", 690, 721, window + "INSERT INTO settings VALUES ('presence_action', 'delay');")
    #expect(try runV2(both, msg()).outcome("m", "b") == "message@\(noon + 120_000)")
    let short = both + "INSERT INTO settings VALUES ('presence_delay_ms', '1000');"
    #expect(try runV2(short, msg()).outcome("m", "b") == "message@\(noon + 60_000)")
    let zero =
      window
      + "INSERT INTO settings VALUES ('presence_action', 'delay'), ('presence_delay_ms', '0');"
    #expect(try runV2(zero, msg()).outcome("m", "b") == "message")
  }

  @Test("deliver_at in decision lines and recipient entries, deferred pairs only; deferred counted")
  func output() throws {
    let s = try runV2(deferring("UTC", 600, 780), msg())
    let line = try #require(s.deliveries("fcm").first)
    let recipients = line["recipients"] as! [[String: Any]]
    #expect(recipients.first?["deliver_at"] as? Int == Int(noon + 3_600_000))
    #expect(
      s.deliveries("apns").first.map {
        ($0["recipients"] as! [[String: Any]]).allSatisfy { $0["deliver_at"] == nil }
      } == true)
    #expect(s.result.counters.deferred == 1)
    let text = String(
      decoding: s.result.gatewayLines[Int(s.index.gateways.find("fcm")!)], as: UTF8.self)
    #expect(text.contains(#""preview":true,"deliver_at":\#(noon + 3_600_000)}"#))
    let decisions = String(decoding: s.result.decisionLines, as: UTF8.self)
    #expect(
      decisions.contains(
        #""user":"b","deliver":true,"trigger":"message","deliver_at":\#(noon + 3_600_000)}"#))
  }
}
