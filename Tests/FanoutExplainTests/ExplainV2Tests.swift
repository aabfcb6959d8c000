import FanoutTestSupport
import Foundation
import Testing

/// Users a, b, c, d in group `g` (3 members: a, b, c); b turned @all off,
/// c muted a, b set thread t1 to 'all'; large channels above 2 members
/// are mentions-only, @all stops above 2.
private let snapshot = SQLiteFixture.make(
  SQLiteFixture.header + """
    INSERT INTO settings VALUES ('large_channel_members', '2'), ('large_channel_level', 'mentions'),
      ('mention_all_max_members', '2'), ('default_chat_level.direct', 'none');
    INSERT INTO users (user_id, mention_all_notifications) VALUES ('a', NULL), ('b', 0), ('c', NULL), ('d', NULL);
    INSERT INTO channels (channel_id, kind) VALUES ('g', 'group'), ('dm', 'direct');
    INSERT INTO members VALUES ('g', 'a'), ('g', 'b'), ('g', 'c'), ('dm', 'a'), ('dm', 'b');
    INSERT INTO devices VALUES (1, 'a', 'apns', 'ta'), (2, 'b', 'fcm', 'tb'), (3, 'c', 'apns', 'tc');
    INSERT INTO user_mutes VALUES ('c', 'a');
    INSERT INTO thread_prefs VALUES ('b', 'g', 't1', 'all');
    """, schema: SQLiteFixture.v2Schema)

private func explain(_ user: String, _ message: String, json: Bool = false) -> (Int32, String) {
  let r = runProcess(
    fanoutExecutable,
    ["explain", "--snapshot", snapshot, "--user", user, "--message", message]
      + (json ? ["--json"] : []))
  return (r.status, String(decoding: r.stdout, as: UTF8.self) + r.stderr)
}

@Suite("fanout explain and prefs get narrate contract v2")
struct ExplainV2Tests {
  @Test("silent, sender_muted, the thread level, the large channel, @all's limit")
  func narration() throws {
    let m =
      #"{"id":"m","channel":"g","sender":"a","ts":1763719200000,"mention_all":true,"thread":"t1"}"#
    let (status, b) = explain("b", m)
    #expect(status == 0, "\(b)")
    #expect(b.contains("decision: delivered (trigger message)"))
    #expect(b.contains("chat_level all set by thread_prefs"))
    #expect(
      b.contains(
        "mention_all has no effect: the channel has 3 members, more than mention_all_max_members 2")
    )
    let (_, c) = explain("c", m)
    #expect(c.contains("decision: not delivered: sender_muted (rule 1)"))
    #expect(c.contains("1. sender_muted: yes, c muted the sender a"))
    #expect(c.contains("chat_level mentions set by settings(large_channel_level)"))
    let (_, silent) = explain("b", m.replacingOccurrences(of: "}", with: #","silent":true}"#))
    #expect(silent.contains("decision: not delivered: silent (rule 0)"))
    #expect(silent.contains("0. silent: yes, the sender asked for no notification"))
    // In the direct channel, @all applies; b turned it off for themself.
    let dm = #"{"id":"d","channel":"dm","sender":"a","ts":1763719200000,"mention_all":true}"#
    let (_, direct) = explain("b", dm)
    #expect(
      direct.contains(
        "mention_all is not a mention for b: mention_all_notifications 0 (from users)"))
    #expect(direct.contains("chat_level none set by settings(default_chat_level.direct)"))
    #expect(direct.contains("decision: not delivered: muted (rule 4)"))

    let (_, j) = explain("b", dm, json: true)
    let object = try JSONSerialization.jsonObject(with: Data(j.utf8)) as! [String: Any]
    let mention = try #require(object["mention"] as? [String: Any])
    #expect(mention["mention_all_applies"] as? Bool == true)
    #expect(mention["mention_all_notifications"] as? Bool == false)
    let chat = try #require((object["settings"] as? [String: Any])?["chat_level"] as? [String: Any])
    #expect(chat["from"] as? String == "kind_default")
  }

  @Test("prefs get: the app settings, mutes, thread levels, and a channel's size default")
  func prefs() throws {
    let r = runProcess(
      fanoutExecutable, ["prefs", "get", "--snapshot", snapshot, "--user", "c", "--channel", "g"])
    let text = String(decoding: r.stdout, as: UTF8.self)
    #expect(r.status == 0, "\(r.stderr)")
    #expect(text.contains("muted users (user_mutes): a"))
    #expect(text.contains("large_channel_level         mentions"))
    #expect(text.contains("g (group, 3 members):"))
    #expect(text.contains("chat_level                mentions  from settings(large_channel_level)"))
  }

  @Test("rule 8: --messages replays the earlier lines and names those counted; --message has none")
  func throttle() throws {
    let throttled = SQLiteFixture.make(
      SQLiteFixture.header + """
        INSERT INTO settings VALUES ('throttle_messages', '2'), ('throttle_window_ms', '600000');
        INSERT INTO users (user_id) VALUES ('a'), ('b');
        INSERT INTO channels (channel_id, kind) VALUES ('dm', 'direct'), ('dm2', 'direct');
        INSERT INTO members VALUES ('dm', 'a'), ('dm', 'b'), ('dm2', 'a'), ('dm2', 'b');
        INSERT INTO devices VALUES (2, 'b', 'fcm', 'tb');
        """, schema: SQLiteFixture.v2Schema)
    let t: Int64 = 1_772_452_800_000
    let traffic = makeTemporaryDirectory() + "/traffic.ndjson"
    try [
      #"{"id":"m1","channel":"dm","sender":"a","ts":\#(t)}"#,
      #"{"id":"m2","channel":"dm2","sender":"a","ts":\#(t + 1)}"#,
      #"{"id":"m3","channel":"dm","sender":"a","ts":\#(t - 600_000)}"#,
      #"{"id":"m4","channel":"dm","sender":"a","ts":\#(t + 2)}"#,
      #"{"id":"m5","channel":"dm","sender":"a","ts":\#(t + 3)}"#,
    ].joined(separator: "\n").write(toFile: traffic, atomically: true, encoding: .utf8)
    func explain(_ id: String) -> (Int32, String) {
      let r = runProcess(
        fanoutExecutable,
        ["explain", "--snapshot", throttled, "--user", "b", "--messages", traffic, "--id", id])
      return (r.status, String(decoding: r.stdout, as: UTF8.self) + r.stderr)
    }
    // m4 counts m1 only (m2 is another channel, m3 is ts − window): delivered.
    let (s4, m4) = explain("m4")
    #expect(s4 == 0, "\(m4)")
    #expect(m4.contains("8. throttled") && m4.contains("counted: line 1, message m1"), "\(m4)")
    #expect(!m4.contains("message m3") && !m4.contains("message m2"), "\(m4)")
    // m5 counts m1 and m4: throttled, as eval decides.
    let (s5, m5) = explain("m5")
    #expect(s5 == 0, "\(m5)")
    #expect(m5.contains("counted: line 4, message m4"), "\(m5)")
    #expect(m5.contains("decision: not delivered: throttled (rule 8)"), "\(m5)")
    let out = makeTemporaryDirectory() + "/out"
    let eval = runProcess(
      fanoutExecutable,
      ["eval", "--snapshot", throttled, "--messages", traffic, "--out", out, "--decisions"])
    #expect(eval.status == 0)
    let decisions = lz4CommandLineDecode(out + "/decisions.ndjson.lz4") ?? ""
    #expect(
      decisions.contains(#"{"message":"m5","user":"b","deliver":false,"reason":"throttled"}"#))
    #expect(decisions.contains(#"{"message":"m4","user":"b","deliver":true,"trigger":"message"}"#))
    // A lone message has no earlier lines, and says so.
    let lone = runProcess(
      fanoutExecutable,
      [
        "explain", "--snapshot", throttled, "--user", "b", "--message",
        #"{"id":"m5","channel":"dm","sender":"a","ts":\#(t)}"#,
      ])
    let text = String(decoding: lone.stdout, as: UTF8.self)
    #expect(lone.status == 0 && text.contains("no earlier lines"), "\(text)")
  }

  @Test(
    "prefs get shows the quiet action and its source, presence windows, presence and throttle settings"
  )
  func prefsPartTwo() throws {
    let snapshot = SQLiteFixture.make(
      readText(datasetURL("sample-v2/snapshot.sql").path), schema: SQLiteFixture.v2Schema)
    func prefs(_ user: String) -> String {
      let r = runProcess(
        fanoutExecutable, ["prefs", "get", "--snapshot", snapshot, "--user", user])
      #expect(r.status == 0, "\(r.stderr)")
      return String(decoding: r.stdout, as: UTF8.self)
    }
    let ana = prefs("ana")
    #expect(ana.contains("quiet action: defer from users"), "\(ana)")
    #expect(ana.contains("presence windows (presence): none"), "\(ana)")
    #expect(ana.contains("throttle_messages           2"), "\(ana)")
    #expect(ana.contains("throttle_window_ms          600000"), "\(ana)")
    #expect(ana.contains("presence_action             suppress"), "\(ana)")
    let ed = prefs("ed")
    #expect(ed.contains("quiet action: drop from default"), "\(ed)")
    #expect(ed.contains("  [1773046800000 (2026-03-09T09:00:00.000Z), 1773048000000"), "\(ed)")
  }
}
