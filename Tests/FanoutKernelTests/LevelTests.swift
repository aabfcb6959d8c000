import FanoutTestSupport
import Testing

@Suite("Levels: chat, call, mentions, pinned")
struct LevelTests {
  @Test("chat level: channel over scope over user over settings over 'all'")
  func chatLevelInheritance() throws {
    // No setting anywhere: 'all'.
    #expect(try run("", msg()).outcome("m", "b") == "message")
    // settings.default_chat_level.
    #expect(
      try run("INSERT INTO settings VALUES ('default_chat_level', 'none');", msg()).outcome(
        "m", "b") == "-muted")
    // users over settings.
    let user =
      "INSERT INTO settings VALUES ('default_chat_level', 'none'); UPDATE users SET chat_level = 'all' WHERE user_id = 'b';"
    #expect(try run(user, msg()).outcome("m", "b") == "message")
    // scope over users, only for that kind of channel.
    let scope =
      "UPDATE users SET chat_level = 'all'; INSERT INTO scope_prefs (user_id, scope, chat_level) VALUES ('b', 'group', 'mentions');"
    let s = try run(scope, msg(), msg("md", channel: "d"))
    #expect(s.outcome("m", "b") == "-not_mentioned")
    #expect(s.outcome("md", "b") == "message")
    // channel over scope.
    let channel =
      scope
      + "INSERT INTO channel_prefs (user_id, channel_id, chat_level) VALUES ('b', 'g', 'none');"
    #expect(try run(channel, msg()).outcome("m", "b") == "-muted")
  }

  @Test("'default' in channel_prefs inherits, as NULL does")
  func channelDefault() throws {
    let sql = """
      INSERT INTO scope_prefs (user_id, scope, chat_level) VALUES ('b', 'group', 'none');
      INSERT INTO channel_prefs (user_id, channel_id, chat_level) VALUES ('b', 'g', 'default'), ('c', 'g', NULL);
      """
    let s = try run(sql, msg())
    #expect(s.outcome("m", "b") == "-muted")
    #expect(s.outcome("m", "c") == "message")
  }

  @Test("calls follow the call level, not the chat level")
  func calls() throws {
    let sql = """
      UPDATE users SET chat_level = 'none' WHERE user_id = 'b';
      UPDATE users SET call_level = 'none' WHERE user_id = 'c';
      """
    let s = try run(sql, msg("m", #""kind":"call""#))
    #expect(s.outcome("m", "b") == "call")
    #expect(s.outcome("m", "c") == "-muted")
    // settings.default_call_level, overridden per channel.
    let defaults = """
      INSERT INTO settings VALUES ('default_call_level', 'none');
      INSERT INTO channel_prefs (user_id, channel_id, call_level) VALUES ('c', 'g', 'all');
      """
    let t = try run(defaults, msg("m", #""kind":"call""#))
    #expect(t.outcome("m", "b") == "-muted")
    #expect(t.outcome("m", "c") == "call")
  }

  @Test("mentions, mention_all and reply_to all count as a mention")
  func mentions() throws {
    let sql = "UPDATE users SET chat_level = 'mentions';"
    let s = try run(
      sql, msg("m1", #""mentions":["b","nobody"]"#), msg("m2", #""mention_all":true"#),
      msg("m3", #""reply_to":"c""#),
      msg("m4"))
    #expect(s.outcome("m1", "b") == "mention")
    #expect(s.outcome("m1", "c") == "-not_mentioned")
    #expect(s.outcome("m2", "b") == "mention")
    #expect(s.outcome("m2", "c") == "mention")
    #expect(s.outcome("m3", "c") == "mention")
    #expect(s.outcome("m3", "b") == "-not_mentioned")
    #expect(s.outcome("m4", "b") == "-not_mentioned")
    // At level 'all' a mention is delivered with trigger 'mention'.
    #expect(try run("", msg("m", #""mentions":["b"]"#)).outcome("m", "b") == "mention")
  }

  @Test("mention_notifications 0 makes a mention an ordinary message")
  func mentionNotificationsOff() throws {
    let sql = """
      UPDATE users SET mention_notifications = 0;
      UPDATE users SET chat_level = 'mentions' WHERE user_id = 'c';
      INSERT INTO scope_prefs (user_id, scope, mention_notifications) VALUES ('a', 'group', 1);
      """
    let s = try run(
      sql, msg("m", sender: "c", #""mentions":["a","b","c"],"reply_to":"b""#),
      msg("m2", sender: "b", #""mention_all":true"#))
    #expect(s.outcome("m", "a") == "mention")  // scope level turns it back on
    #expect(s.outcome("m", "b") == "message")
    #expect(s.outcome("m2", "c") == "-not_mentioned")
  }

  @Test("pinned: delivered at all and mentions, muted at none; with 0, as a message")
  func pinned() throws {
    let sql = """
      UPDATE users SET chat_level = 'mentions' WHERE user_id = 'b';
      UPDATE users SET chat_level = 'none' WHERE user_id = 'c';
      """
    let s = try run(sql, msg("m", #""kind":"pinned""#))
    #expect(s.outcome("m", "b") == "pinned")
    #expect(s.outcome("m", "c") == "-muted")
    let off =
      sql
      + "UPDATE users SET pinned_notifications = 0; INSERT INTO users (user_id, pinned_notifications) VALUES ('e', 0);"
      + "INSERT INTO members VALUES ('g', 'e'); INSERT INTO devices VALUES (5, 'e', 'apns', 'te');"
    let t = try run(
      off, msg("m", #""kind":"pinned""#), msg("m2", #""kind":"pinned","mentions":["b"]"#))
    #expect(t.outcome("m", "b") == "-not_mentioned")
    #expect(t.outcome("m2", "b") == "mention")
    #expect(t.outcome("m", "c") == "-muted")
    #expect(t.outcome("m", "e") == "message")
  }

  @Test("the sender and non-members form no pair")
  func senderAndNonMembers() throws {
    let s = try run(
      "INSERT INTO users (user_id) VALUES ('z');", msg("m", channel: "d", #""mentions":["z"]"#))
    #expect(s.outcome("m", "a") == nil)
    #expect(s.outcome("m", "z") == nil)
    #expect(s.outcome("m", "b") == "message")
    #expect(s.result.counters.pairs == 1)
    // An unknown sender excludes nobody.
    #expect(try run("", msg(channel: "d", sender: "ghost")).result.counters.pairs == 2)
  }

  @Test("show_preview resolves through the chain and lands in each recipient")
  func preview() throws {
    let sql = """
      UPDATE users SET show_preview = 0 WHERE user_id IN ('b', 'c');
      INSERT INTO scope_prefs (user_id, scope, show_preview) VALUES ('c', 'group', 1);
      INSERT INTO channel_prefs (user_id, channel_id, show_preview) VALUES ('a', 'g', 0);
      """
    let s = try run(sql, msg(sender: nil))
    let previews = (s.deliveries("apns") + s.deliveries("fcm")).flatMap {
      $0["recipients"] as! [[String: Any]]
    }
    .reduce(into: [String: Bool]()) { $0[$1["user"] as! String] = $1["preview"] as? Bool }
    #expect(previews == ["a": false, "b": false, "c": true])
  }
}
