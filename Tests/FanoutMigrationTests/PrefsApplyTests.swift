import FanoutMigration
import FanoutTestSupport
import Foundation
import Synchronization
import Testing

// 2026-03-09 is a Monday. Asia/Seoul is UTC+9 all year.
private let monday = ms("2026-03-09T00:00:00Z")

@Suite("prefs apply: Stream Chat")
struct StreamFormatTests {
  @Test("user and channel chat_level: the channel overrides the user")
  func levels() throws {
    let s = try applying(
      .stream,
      #"{"preferences":[{"user_id":"u2","chat_level":"mentions"},{"user_id":"u2","channel_cid":"group:g","chat_level":"all"}]}"#
    )
    #expect(try decision(s, user: "u2", ts: monday) == "message")
    #expect(
      try decision(s, user: "u2", channel: "dm:u1-u2", sender: "u1", ts: monday) == "-not_mentioned"
    )
    let back = try applying(
      .stream,
      #"{"preferences":[{"user_id":"u2","channel_cid":"group:g","chat_level":"default"}]}"#, to: s)
    #expect(try decision(back, user: "u2", ts: monday) == "-not_mentioned")
  }

  @Test("disabled_until snoozes until then; remove_disable lifts it; call_level")
  func snooze() throws {
    let until = "2026-03-09T12:00:00Z"
    let s = try applying(
      .stream,
      #"{"preferences":[{"user_id":"u2","disabled_until":"\#(until)","call_level":"none"}]}"#)
    #expect(try decision(s, user: "u2", ts: ms(until) - 1) == "-snoozed")
    #expect(try decision(s, user: "u2", ts: ms(until)) == "message")
    #expect(try decision(s, user: "u2", ts: ms(until), extra: #","kind":"call""#) == "-muted")
    let lifted = try applying(
      .stream, #"{"preferences":[{"user_id":"u2","remove_disable":true}]}"#, to: s)
    #expect(try decision(lifted, user: "u2", ts: ms(until) - 1) == "message")
  }

  @Test("client-side: --as-user fills in user_id and refuses any other user")
  func clientSide() throws {
    let own = try applying(.stream, #"{"preferences":[{"chat_level":"none"}]}"#, asUser: "u2")
    #expect(try decision(own, user: "u2", ts: monday) == "-muted")
    #expect(try decision(own, user: "u1", ts: monday) == "message")
    let other = refusal(
      .stream, #"{"preferences":[{"chat_level":"none"},{"user_id":"u1","chat_level":"none"}]}"#,
      asUser: "u2")
    #expect(other.contains("entry 2: user_id 'u1' is not the --as-user 'u2'"), "\(other)")
  }

  @Test("a misspelt field is refused, naming the closest known one, even beside a real change")
  func unknownField() throws {
    let typo = refusal(
      .stream, #"{"preferences":[{"user_id":"u1","chat_level":"none","chat_levle":"x"}]}"#)
    #expect(
      typo.contains(#"$.preferences[0]: unknown field "chat_levle" (did you mean "chat_level"?)"#),
      "\(typo)")
    let nested = refusal(
      .sendbird,
      #"[{"method":"set_weekly_do_not_disturb","user_id":"u1","dnd_schedules":{"MONDAY":[{"start_hour":1,"start_min":0,"end_hour":2,"end_mni":0}]}}]"#
    )
    #expect(
      nested.contains(
        #"$[0].dnd_schedules.MONDAY[0]: unknown field "end_mni" (did you mean "end_min"?)"#),
      "\(nested)")
    let shape = refusal(.sendbird, #"{"method":"x"}"#)
    #expect(
      shape.contains("$: expected an array; this format's request is [{\"method\""), "\(shape)")
    #expect(!shape.contains("Dictionary") && !shape.contains("Array<"), "\(shape)")
    let type = refusal(.stream, #"{"preferences":[{"user_id":"u1","chat_level":5}]}"#)
    #expect(type.contains("$.preferences[0].chat_level: expected a string"), "\(type)")
  }

  @Test("client-side: --as-user may not take another user's device token; server-side moves it")
  func tokenTakeover() throws {
    let takeover = #"[{"method":"register_push_token","token_type":"apns","token":"a1"}]"#
    let refused = refusal(.sendbird, takeover, asUser: "u2")
    #expect(
      refused.contains("entry 1") && refused.contains("registered to another user"), "\(refused)")
    // The user's own token, registered again, is fine.
    _ = try applying(
      .sendbird, #"[{"method":"register_push_token","token_type":"apns","token":"a2"}]"#,
      asUser: "u2")
    // Server-side, the token moves, as the push services' registries move it.
    let moved = try applying(
      .sendbird,
      #"[{"method":"register_push_token","user_id":"u2","token_type":"apns","token":"a1"}]"#)
    let holder = runProcess(
      "/usr/bin/sqlite3", [moved, "SELECT user_id FROM devices WHERE token = 'a1'"])
    #expect(holder.text == "u2\n", "\(holder.text)")
  }

  @Test("all or nothing: a bad entry is named and nothing changes")
  func atomic() throws {
    let before = try Data(contentsOf: URL(fileURLWithPath: baseSnapshot))
    let dir = makeTemporaryDirectory()
    let changes = dir + "/c.json"
    try
      #"{"preferences":[{"user_id":"u1","chat_level":"none"},{"user_id":"u2","channel_cid":"nope:x","chat_level":"all"}]}"#
      .write(toFile: changes, atomically: true, encoding: .utf8)
    let copy = dir + "/s.sqlite"
    try before.write(to: URL(fileURLWithPath: copy))
    let r = runProcess(
      fanoutExecutable, ["prefs", "apply", "--snapshot", copy, "--format", "stream", changes])
    #expect(r.status == 65)
    #expect(r.stderr.contains("entry 2: unknown channel 'nope:x'"), "\(r.stderr)")
    #expect(try Data(contentsOf: URL(fileURLWithPath: copy)) == before)
    #expect(listDirectory(dir) == [".s.sqlite.lock", "c.json", "s.sqlite"])
    #expect(
      refusal(.stream, #"{"preferences":[{"user_id":"u1","chat_level":"loud"}]}"#).contains(
        "entry 1: chat_level 'loud'"))
    #expect(
      refusal(.stream, #"{"preferences":[{"user_id":"u1"}]}"#).contains("changes nothing"))
    #expect(
      refusal(.stream, #"{"preferences":[{"user_id":7}]}"#).contains("$.preferences[0].user_id"))
  }
}

@Suite("prefs apply: Sendbird")
struct SendbirdFormatTests {
  /// Sendbird's example: DND from Monday 22:00 to Tuesday 07:00 arrives split
  /// over the two days, the first window ending at 23:59.
  static let weekly = """
    [{"method":"set_weekly_do_not_disturb","user_id":"u1","do_not_disturb_on":true,"timezone":"Asia/Seoul",
      "dnd_schedules":{"MONDAY":[{"start_hour":22,"start_min":0,"end_hour":23,"end_min":59}],
                       "TUESDAY":[{"start_hour":0,"start_min":0,"end_hour":7,"end_min":0}]}}]
    """

  @Test("weekly DND Monday 22:00 – Tuesday 07:00, split at midnight")
  func weeklySplit() throws {
    let s = try applying(.sendbird, Self.weekly)
    let seoulMonday = ms("2026-03-09T00:00:00+09:00")
    let at = { (minutes: Int64) in try decision(s, user: "u1", ts: seoulMonday + minutes * 60_000) }
    #expect(try at(21 * 60 + 59) == "message")
    #expect(try at(22 * 60) == "-dnd")
    #expect(try at(23 * 60 + 59) == "-dnd")  // 23:59 runs to midnight
    #expect(try at(24 * 60 + 6 * 60 + 59) == "-dnd")  // Tuesday 06:59
    #expect(try at(24 * 60 + 7 * 60) == "message")  // Tuesday 07:00
    #expect(try at(2 * 24 * 60 + 23 * 60) == "message")  // Wednesday 23:00
  }

  @Test("weekly schedules replace the legacy daily window while set")
  func weeklyReplacesDaily() throws {
    let daily = try applying(
      .sendbird,
      #"[{"method":"set_do_not_disturb","user_id":"u1","do_not_disturb_on":true,"start_hour":12,"start_min":0,"end_hour":13,"end_min":0}]"#
    )
    let wednesdayNoon = ms("2026-03-11T12:30:00+09:00")
    #expect(try decision(daily, user: "u1", ts: wednesdayNoon) == "-dnd")
    let weekly = try applying(.sendbird, Self.weekly, to: daily)
    #expect(try decision(weekly, user: "u1", ts: wednesdayNoon) == "message")
    let cleared = try applying(
      .sendbird,
      #"[{"method":"set_weekly_do_not_disturb","user_id":"u1","do_not_disturb_on":false}]"#,
      to: weekly)
    #expect(try decision(cleared, user: "u1", ts: wednesdayNoon) == "-dnd")
    #expect(
      refusal(
        .sendbird,
        #"[{"method":"set_weekly_do_not_disturb","user_id":"u1","do_not_disturb_on":true,"dnd_schedules":{"MONDAY":[{"start_hour":22,"start_min":0,"end_hour":7,"end_min":0}]}}]"#
      ).contains("split one that crosses midnight"))
  }

  @Test("trigger options, channel default, snooze period [start, end)")
  func triggerAndSnooze() throws {
    let s = try applying(
      .sendbird,
      """
      [{"method":"set_push_trigger_option","user_id":"u2","push_trigger_option":"mention_only"},
       {"method":"set_channel_push_trigger_option","user_id":"u2","channel_url":"group:g","push_trigger_option":"all"},
       {"method":"set_snooze_period","user_id":"u3","snooze_on":true,"start_ts":1000,"end_ts":2000}]
      """)
    #expect(try decision(s, user: "u2", ts: monday) == "message")
    #expect(
      try decision(s, user: "u2", channel: "dm:u1-u2", sender: "u1", ts: monday) == "-not_mentioned"
    )
    #expect(try decision(s, user: "u3", sender: "u1", ts: 1000) == "-snoozed")
    #expect(try decision(s, user: "u3", sender: "u1", ts: 2000) == "message")
    let d = try applying(
      .sendbird,
      #"[{"method":"set_channel_push_trigger_option","user_id":"u2","channel_url":"group:g","push_trigger_option":"default"}]"#,
      to: s)
    #expect(try decision(d, user: "u2", ts: monday) == "-not_mentioned")
  }

  @Test(
    "push tokens: unique registration replaces the gateway's others; unregistering all leaves no device"
  )
  func tokens() throws {
    let s = try applying(
      .sendbird,
      #"[{"method":"register_push_token","user_id":"u2","token_type":"apns","token":"new","unique":true},{"method":"register_push_token","user_id":"u2","token_type":"gcm","token":"g2"}]"#
    )
    let line = #"{"id":"x","channel":"group:g","sender":"u3","ts":0}"#
    let scenario = try Scenario(snapshot: s, messages: [line])
    let tokens = ["apns", "fcm"].flatMap { g in
      scenario.deliveries(g).flatMap { ($0["recipients"] as! [[String: Any]]) }
        .filter { $0["user"] as! String == "u2" }.map { "\($0["token"]!)" }
    }
    #expect(tokens == ["new", "g2"])
    let none = try applying(
      .sendbird, #"[{"method":"unregister_all_push_tokens","user_id":"u2"}]"#, to: s)
    #expect(try decision(none, user: "u2", ts: 0) == "-no_device")
    #expect(
      refusal(
        .sendbird,
        #"[{"method":"unregister_push_token","user_id":"u2","token_type":"apns","token":"zz"}]"#
      ).contains("has no apns token 'zz'"))
  }
}

@Suite("prefs apply: Easemob")
struct EasemobFormatTests {
  /// Easemob's example: DND interval 8:0-10:0 and a 240-minute DND duration;
  /// the user gets nothing in either period (their union).
  @Test("interval 8:0-10:0 with a 240-minute duration")
  func intervalAndDuration() throws {
    let now = ms("2026-03-09T12:00:00+09:00")
    let s = try applying(
      .easemob, #"[{"user":"u1","interval":"8:0-10:0","duration":240}]"#, now: now)
    #expect(try decision(s, user: "u1", ts: now + 60 * 60_000) == "-snoozed")
    #expect(try decision(s, user: "u1", ts: now + 240 * 60_000 - 1) == "-snoozed")
    #expect(try decision(s, user: "u1", ts: now + 240 * 60_000) == "message")
    #expect(try decision(s, user: "u1", ts: ms("2026-03-10T09:00:00+09:00")) == "-dnd")
    #expect(try decision(s, user: "u1", ts: ms("2026-03-10T10:00:00+09:00")) == "message")
    let off = try applying(.easemob, #"[{"user":"u1","interval":"0:0-0:0"}]"#, to: s)
    #expect(try decision(off, user: "u1", ts: ms("2026-03-10T09:00:00+09:00")) == "message")
    let allDay = try applying(.easemob, #"[{"user":"u1","interval":"9:30-9:30"}]"#, to: off)
    #expect(try decision(allDay, user: "u1", ts: ms("2026-03-10T20:00:00+09:00")) == "-dnd")
    let overnight = try applying(.easemob, #"[{"user":"u1","interval":"22:0-7:0"}]"#, to: off)
    #expect(try decision(overnight, user: "u1", ts: ms("2026-03-10T06:59:00+09:00")) == "-dnd")
    #expect(try decision(overnight, user: "u1", ts: ms("2026-03-10T07:00:00+09:00")) == "message")
  }

  @Test("remind types at app and conversation level; clearing the conversation's")
  func remindTypes() throws {
    let s = try applying(
      .easemob,
      #"[{"user":"u2","remind_type":"MentionOnly"},{"user":"u2","conversation":"group:g","remind_type":"All"}]"#
    )
    #expect(try decision(s, user: "u2", ts: monday) == "message")
    #expect(
      try decision(s, user: "u2", channel: "dm:u1-u2", sender: "u1", ts: monday) == "-not_mentioned"
    )
    #expect(
      try decision(
        s, user: "u2", channel: "dm:u1-u2", sender: "u1", ts: monday, extra: #","mentions":["u2"]"#)
        == "mention")
    let cleared = try applying(
      .easemob, #"[{"user":"u2","conversation":"group:g","clear_remind_type":true}]"#, to: s)
    #expect(try decision(cleared, user: "u2", ts: monday) == "-not_mentioned")
    let conversationSnooze = try applying(
      .easemob, #"[{"user":"u2","conversation":"dm:u1-u2","duration":60}]"#, now: monday)
    #expect(
      try decision(conversationSnooze, user: "u2", channel: "dm:u1-u2", sender: "u1", ts: monday)
        == "-snoozed")
    #expect(try decision(conversationSnooze, user: "u2", ts: monday) == "message")
    #expect(refusal(.easemob, #"[{"user":"u2","duration":10081}]"#).contains("outside 0..10080"))
    #expect(
      refusal(.easemob, #"[{"user":"u2","conversation":"group:g","interval":"8:0-9:0"}]"#).contains(
        "app-level only"))
    #expect(refusal(.easemob, #"[{"user":"u2","interval":"24:0-9:0"}]"#).contains("is not H:M-H:M"))
  }
}

@Suite("prefs apply: SuprSend")
struct SuprSendFormatTests {
  @Test("a non-editable category, and a channel mandatory in its category, are refused")
  func nonEditable() {
    #expect(
      refusal(.suprsend, #"[{"distinct_id":"u1","category":"security","preference":"opt_out"}]"#)
        .contains("entry 1: category 'security' is not editable"))
    #expect(
      refusal(
        .suprsend, #"[{"distinct_id":"u1","category":"digest","opt_out_channels":["email"]}]"#
      )
      .contains("channel 'email' is not editable in category 'digest'"))
  }

  @Test("category opt-out, per-channel opt-out, and restricted (required-only) channels")
  func categories() throws {
    let out = try applying(
      .suprsend, #"[{"distinct_id":"u1","category":"newsletter","preference":"opt_out"}]"#)
    #expect(
      try decision(out, user: "u1", ts: 0, extra: #","category":"newsletter""#) == "-opted_out")
    let perChannel = try applying(
      .suprsend,
      #"[{"distinct_id":"u1","category":"newsletter","preference":"opt_in","opt_out_channels":["email"]}]"#,
      to: out)
    let line = #"{"id":"x","channel":"group:g","sender":"u3","ts":0,"category":"newsletter"}"#
    let scenario = try Scenario(snapshot: perChannel, messages: [line])
    #expect(scenario.deliveries("email").isEmpty)
    #expect(scenario.deliveries("apns").count == 1)
    let restricted = try applying(
      .suprsend,
      #"[{"distinct_id":"u1","channel_preferences":[{"channel":"apns","is_restricted":true}]}]"#)
    #expect(try decision(restricted, user: "u1", ts: 0) == "message")  // email still passes
    let onlyApns = try applying(
      .suprsend,
      #"[{"distinct_id":"u1","channel_preferences":[{"channel":"email","is_restricted":true}]}]"#,
      to: restricted)
    #expect(try decision(onlyApns, user: "u1", ts: 0) == "-opted_out")
    #expect(try decision(onlyApns, user: "u1", ts: 0, extra: #","category":"digest""#) == "message")
  }
}

@Suite("prefs apply: TDLib")
struct TDLibFormatTests {
  @Test("scope mute_for from --now; per-chat mention switch and use_default; show_preview")
  func settings() throws {
    let now = monday
    let s = try applying(
      .tdlib,
      """
      [{"@type":"setScopeNotificationSettings","scope":{"@type":"notificationSettingsScopeGroupChats"},
        "notification_settings":{"@type":"scopeNotificationSettings","mute_for":3600,"show_preview":true}},
       {"@type":"setChatNotificationSettings","chat_id":"dm:u1-u2",
        "notification_settings":{"@type":"chatNotificationSettings","use_default_show_preview":false,"show_preview":false,
          "use_default_disable_mention_notifications":false,"disable_mention_notifications":true}}]
      """, asUser: "u2", now: now)
    #expect(try decision(s, user: "u2", ts: now + 1_800_000) == "-snoozed")
    #expect(try decision(s, user: "u2", ts: now + 3_600_000) == "message")
    let dm = { (extra: String) in
      try decision(s, user: "u2", channel: "dm:u1-u2", sender: "u1", ts: now, extra: extra)
    }
    #expect(try dm("") == "message")
    #expect(try dm(#","mentions":["u2"]"#) == "message")  // a mention counts as ordinary
    let line = #"{"id":"x","channel":"dm:u1-u2","sender":"u1","ts":\#(now)}"#
    let preview = try Scenario(snapshot: s, messages: [line]).deliveries("apns")
    #expect((preview.first?["recipients"] as? [[String: Any]])?.first?["preview"] as? Bool == false)
    let restored = try applying(
      .tdlib,
      #"[{"@type":"setChatNotificationSettings","chat_id":"dm:u1-u2","notification_settings":{"use_default_disable_mention_notifications":true,"use_default_mute_for":true}}]"#,
      to: s, asUser: "u2", now: now)
    #expect(
      try decision(
        restored, user: "u2", channel: "dm:u1-u2", sender: "u1", ts: now,
        extra: #","mentions":["u2"]"#)
        == "mention")
    #expect(refusal(.tdlib, "[]").contains("--as-user"))
  }

  @Test("a mute past the end of time (mute_for Int64.max, or --now at its end) snoozes to its end")
  func muteToTheEnd() throws {
    let forever = try applying(
      .tdlib,
      #"[{"@type":"setScopeNotificationSettings","scope":{"@type":"notificationSettingsScopeGroupChats"},"notification_settings":{"mute_for":9223372036854775807}}]"#,
      asUser: "u2", now: monday)
    #expect(try decision(forever, user: "u2", ts: monday + 86_400_000 * 365_000) == "-snoozed")
    let late = try applying(
      .easemob, #"[{"user":"u2","duration":60}]"#, now: Int64.max)
    #expect(try decision(late, user: "u2", ts: monday) == "message")
  }
}

@Suite("prefs apply: the README's examples in datasets/changes")
struct ChangeExamplesTests {
  @Test("all five apply to the sample, in order, through the command line")
  func examples() throws {
    let snapshot = SQLiteFixture.make(readText(datasetURL("sample/snapshot.sql").path))
    for format in ["stream", "sendbird", "easemob", "suprsend", "tdlib"] {
      let r = runProcess(
        fanoutExecutable,
        [
          "prefs", "apply", "--snapshot", snapshot, "--format", format, "--now",
          "2026-03-08T06:00:00Z",
        ]
          + (format == "tdlib" ? ["--as-user", "carol"] : []) + [
            datasetURL("changes/\(format).json").path
          ])
      #expect(r.status == 0, "\(format): \(r.stderr)")
    }
    // Sendbird: Alice (now in Asia/Seoul) has DND Monday 22:00 – Tuesday 07:00.
    #expect(
      try decision(
        snapshot, user: "alice", channel: "messaging:general", sender: "bob",
        ts: ms("2026-03-09T23:30:00+09:00")) == "-dnd")
    // Easemob: Bob's 240-minute duration from --now, and his 8:00-10:00 interval.
    #expect(
      try decision(
        snapshot, user: "bob", channel: "messaging:general", sender: "alice",
        ts: ms("2026-03-08T09:59:00Z")) == "-snoozed")
    #expect(
      try decision(
        snapshot, user: "bob", channel: "dm:alice-bob", sender: "alice",
        ts: ms("2026-03-09T09:00:00+08:00")) == "-dnd")
    // Stream: Dave follows team:eng in full, mentions elsewhere.
    #expect(
      try decision(
        snapshot, user: "dave", channel: "team:eng", sender: "carol", ts: ms("2026-03-08T13:00:00Z")
      )
        == "message")
  }
}

@Suite("prefs apply --out: never over what it reads")
struct ApplyOutTests {
  /// `--out` is written over: naming the snapshot or the changes file (given
  /// by path or on standard input) is refused, and both are left as they were.
  @Test("--out naming the snapshot or the changes file is refused, both kept")
  func outNeverAnInput() throws {
    let snapshot = SQLiteFixture.make(readText(datasetURL("sample/snapshot.sql").path))
    let before = try Data(contentsOf: URL(fileURLWithPath: snapshot))
    let changes = makeTemporaryDirectory() + "/changes.json"
    let text = readText(datasetURL("changes/stream.json").path)
    try text.write(toFile: changes, atomically: false, encoding: .utf8)
    let apply = "'\(fanoutExecutable)' prefs apply --snapshot '\(snapshot)' --format stream"
    for (command, message) in [
      (apply + " --out '\(snapshot)' '\(changes)'", "is the snapshot: omit --out"),
      (apply + " --out '\(changes)' '\(changes)'", "is the changes file"),
      (apply + " --out '\(changes)' - < '\(changes)'", "is the changes file"),
    ] {
      let r = runProcess("/bin/sh", ["-c", command])
      #expect(r.status == 64, "\(command): \(r.stderr)")
      #expect(r.stderr.contains(message), "\(r.stderr)")
    }
    #expect(try Data(contentsOf: URL(fileURLWithPath: snapshot)) == before)
    #expect(readText(changes) == text)
  }
}

@Suite("prefs apply: snapshots without the optional tables")
struct OptionalTablesTests {
  @Test("scope_prefs, dnd_weekly and gateway_prefs are created as the schema defines them")
  func createsTables() throws {
    let required = ["users", "channels", "members", "channel_prefs", "devices"]
    let schema = SQLiteFixture.schema.components(separatedBy: "CREATE TABLE ").filter { part in
      required.contains { part.hasPrefix($0 + " ") }
    }.map { "CREATE TABLE " + $0 }.joined()
    let minimal = SQLiteFixture.make(
      """
      INSERT INTO users (user_id) VALUES ('a'), ('b');
      INSERT INTO channels VALUES ('g', 'group');
      INSERT INTO members VALUES ('g', 'a'), ('g', 'b');
      INSERT INTO devices VALUES (1, 'a', 'email', 'a@example.com');
      """, schema: schema)
    let friday = ms("2026-03-13T01:30:00Z")
    let s = try applying(
      .sendbird,
      #"[{"method":"set_weekly_do_not_disturb","user_id":"a","do_not_disturb_on":true,"dnd_schedules":{"friday":[{"start_hour":1,"start_min":0,"end_hour":2,"end_min":0}]}}]"#,
      to: minimal)
    #expect(try decision(s, user: "a", channel: "g", sender: "b", ts: friday) == "-dnd")
    let muted = try applying(
      .tdlib,
      #"[{"@type":"setScopeNotificationSettings","scope":{"@type":"notificationSettingsScopeGroupChats"},"notification_settings":{"mute_for":60}}]"#,
      to: minimal, asUser: "a", now: friday)
    #expect(try decision(muted, user: "a", channel: "g", sender: "b", ts: friday) == "-snoozed")
    let restricted = try applying(
      .suprsend,
      #"[{"distinct_id":"a","channel_preferences":[{"channel":"email","is_restricted":true}]}]"#,
      to: minimal)
    #expect(
      try decision(restricted, user: "a", channel: "g", sender: "b", ts: friday) == "-opted_out")
  }
}

@Suite("prefs apply: concurrent batches")
struct ConcurrentApplyTests {
  @Test("batches for one snapshot take turns: none is lost")
  func noLostUpdate() throws {
    let (dir, snapshot) = try copyOfBase()
    let entries = [
      #"{"user_id":"u1","chat_level":"none"}"#, #"{"user_id":"u2","chat_level":"none"}"#,
      #"{"user_id":"u3","call_level":"none"}"#,
      #"{"user_id":"u1","channel_cid":"dm:u1-u2","chat_level":"mentions"}"#,
      #"{"user_id":"u2","channel_cid":"dm:u1-u2","chat_level":"all"}"#,
      #"{"user_id":"u3","channel_cid":"group:g","chat_level":"mentions"}"#,
    ]
    for (i, entry) in entries.enumerated() {
      try #"{"preferences":[\#(entry)]}"#.write(
        toFile: dir + "/\(i).json", atomically: true, encoding: .utf8)
    }
    let statuses = Mutex([Int32](repeating: -1, count: entries.count))
    DispatchQueue.concurrentPerform(iterations: entries.count) { i in
      let r = runProcess(
        fanoutExecutable,
        ["prefs", "apply", "--snapshot", snapshot, "--format", "stream", dir + "/\(i).json"])
      statuses.withLock { $0[i] = r.status }
    }
    #expect(statuses.withLock { $0 } == [Int32](repeating: 0, count: entries.count))
    #expect(try decision(snapshot, user: "u1", ts: 0) == "-muted")
    #expect(
      try decision(snapshot, user: "u2", channel: "dm:u1-u2", sender: "u1", ts: 0) == "message")
    #expect(
      try decision(snapshot, user: "u1", channel: "dm:u1-u2", sender: "u2", ts: 0)
        == "-not_mentioned")
    #expect(try decision(snapshot, user: "u3", sender: "u1", ts: 0) == "-not_mentioned")
    #expect(
      try decision(snapshot, user: "u3", sender: "u1", ts: 0, extra: #","kind":"call""#) == "-muted"
    )
  }

  /// Another process has the snapshot open (WAL frames not yet in the main
  /// file, a reader in the middle of a transaction): the batch lands in the
  /// same file, in one transaction, and the file stays whole.
  @Test(
    "in place on a snapshot another process has open, in WAL and rollback-journal mode",
    arguments: ["WAL", "DELETE"])
  func inPlaceWhileOpen(journalMode: String) throws {
    let (dir, snapshot) = try copyOfBase()
    let other = SQLiteSession(snapshot)
    #expect(other.execute("PRAGMA journal_mode = \(journalMode)") == nil)
    // A commit of its own: in WAL mode it stays in the -wal file for now.
    #expect(other.execute("UPDATE users SET show_preview = 0 WHERE user_id = 'u3'") == nil)
    func inode() throws -> Int? {
      try FileManager.default.attributesOfItem(atPath: snapshot)[.systemFileNumber] as? Int
    }
    let before = try inode()
    let result = applyMutingU1(to: snapshot, in: dir)
    #expect(result.status == 0, "\(result.stderr)")
    // The same file, changed in place: the open connection sees the batch.
    #expect(try inode() == before)
    #expect(other.value("SELECT chat_level FROM users WHERE user_id = 'u1'") == "none")
    #expect(other.value("SELECT show_preview FROM users WHERE user_id = 'u3'") == "0")
    #expect(other.value("PRAGMA integrity_check") == "ok")
    #expect(try decision(snapshot, user: "u1", sender: "u2", ts: 0) == "-muted")
  }

  @Test("a snapshot another writer holds is waited for, then reported busy (exit 75)")
  func busyWriter() throws {
    let (dir, snapshot) = try copyOfBase()
    let writer = SQLiteSession(snapshot)
    #expect(writer.execute("BEGIN IMMEDIATE") == nil)
    let result = applyMutingU1(to: snapshot, in: dir, ["--busy-timeout", "200"])
    #expect(result.status == 75, "\(result.stderr)")
    #expect(result.stderr.contains("snapshot busy"))
    #expect(writer.execute("ROLLBACK") == nil)
    #expect(try decision(snapshot, user: "u1", sender: "u2", ts: 0) == "message")
  }

  @Test("a missing snapshot is named, and no lock file is left beside it")
  func missingSnapshot() {
    let dir = makeTemporaryDirectory()
    let result = runProcess(
      fanoutExecutable,
      ["prefs", "apply", "--snapshot", dir + "/none.sqlite", "--format", "stream", "-"],
      input: Array("{}".utf8))
    #expect(result.status == 66, "\(result.stderr)")
    #expect(result.stderr.contains("No such file or directory"), "\(result.stderr)")
    #expect(listDirectory(dir).isEmpty)
  }

  @Test("endless changes (/dev/zero) are refused at 256 MiB, the snapshot untouched")
  func endlessChanges() throws {
    let (dir, snapshot) = try copyOfBase()
    let before = FileManager.default.contents(atPath: snapshot)
    let result = runProcess(
      fanoutExecutable,
      ["prefs", "apply", "--snapshot", snapshot, "--format", "stream", "/dev/zero"])
    #expect(result.status == 66, "\(result.stderr)")
    #expect(result.stderr.contains("larger than 256 MiB; apply it in batches"), "\(result.stderr)")
    #expect(FileManager.default.contents(atPath: snapshot) == before)
    #expect(listDirectory(dir) == [".s.sqlite.lock", "s.sqlite"], "\(listDirectory(dir))")
  }

  /// A copy of the base snapshot in a folder of its own.
  private func copyOfBase() throws -> (dir: String, snapshot: String) {
    let dir = makeTemporaryDirectory()
    try FileManager.default.copyItem(atPath: baseSnapshot, toPath: dir + "/s.sqlite")
    return (dir, dir + "/s.sqlite")
  }

  /// `fanout prefs apply` of one Stream entry: u1's chat level to none.
  private func applyMutingU1(to snapshot: String, in dir: String, _ extra: [String] = [])
    -> ProcessResult
  {
    try! #"{"preferences":[{"user_id":"u1","chat_level":"none"}]}"#.write(
      toFile: dir + "/changes.json", atomically: true, encoding: .utf8)
    return runProcess(
      fanoutExecutable,
      ["prefs", "apply", "--snapshot", snapshot, "--format", "stream"] + extra + [
        dir + "/changes.json"
      ])
  }
}
