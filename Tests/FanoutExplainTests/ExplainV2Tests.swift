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
}
