import FanoutTestSupport
import Testing

/// Contract v2, section 5.3, rule by rule at its edges. The world: users a,
/// b, c; group `g` (a, b, c), direct `d` (a, b), broadcast `news` (a, b, c).
@Suite("Contract v2 rules: silent, sender_muted, threads, size and kind defaults, @all")
struct V2RuleTests {
  @Test("silent beats force, mentions, calls and every setting")
  func silent() throws {
    let s = try runV2(
      "UPDATE users SET dnd_start = 0, dnd_end = 0;",
      msg("m1", #""silent":true,"force":true,"mentions":["b"],"mention_all":true"#),
      msg("m2", #""silent":true,"kind":"call""#), msg("m3", #""silent":false"#),
      msg("m4", #""silent":null"#))
    #expect(s.outcome("m1", "b") == "-silent")
    #expect(s.outcome("m1", "c") == "-silent")
    #expect(s.outcome("m2", "b") == "-silent")
    // false and null are v1: all day DND.
    #expect(s.outcome("m3", "b") == "-dnd")
    #expect(s.outcome("m4", "b") == "-dnd")
  }

  @Test("sender_muted beats force and mentions; only for the muting user; a self-mute is no-op")
  func senderMuted() throws {
    let sql = """
      INSERT INTO user_mutes VALUES ('b', 'a'), ('a', 'a'), ('c', 'b');
      UPDATE users SET snooze_until = 9000000000000 WHERE user_id = 'b';
      """
    let s = try runV2(
      sql, msg("m1", #""force":true,"mentions":["b","c"],"reply_to":"b""#),
      msg("m2", sender: "c"), msg("m3", sender: nil), msg("m4", sender: "ghost"))
    #expect(s.outcome("m1", "b") == "-sender_muted")
    #expect(s.outcome("m1", "c") == "mention")
    // b muted a only: other senders go on to b's snooze.
    #expect(s.outcome("m2", "b") == "-snoozed")
    #expect(s.outcome("m2", "a") == "message")
    #expect(s.outcome("m3", "b") == "-snoozed")
    #expect(s.outcome("m4", "b") == "-snoozed")
    // Rule 0 comes first.
    let silent = try runV2(sql, msg("m", #""silent":true"#))
    #expect(silent.outcome("m", "b") == "-silent")
  }

  @Test("thread_prefs set the chat level for that thread only, above the channel's")
  func threads() throws {
    let sql = """
      INSERT INTO channel_prefs (user_id, channel_id, chat_level) VALUES ('b', 'g', 'none');
      INSERT INTO thread_prefs VALUES ('b', 'g', 't', 'all'), ('c', 'g', '', 'none'),
        ('c', 'd', 't', 'none'), ('b', 'g', 'calls', 'none');
      """
    let s = try runV2(
      sql, msg("m1", #""thread":"t""#), msg("m2"), msg("m3", #""thread":"""#),
      msg("m4", #""thread":"other""#), msg("m5", #""thread":null"#),
      msg("m6", #""thread":"calls","kind":"call""#))
    #expect(s.outcome("m1", "b") == "message")
    #expect(s.outcome("m1", "c") == "message")
    // No thread: thread_prefs do not apply, the channel's level does.
    #expect(s.outcome("m2", "b") == "-muted")
    #expect(s.outcome("m5", "b") == "-muted")
    // "" is a thread like any other.
    #expect(s.outcome("m3", "c") == "-muted")
    #expect(s.outcome("m3", "b") == "-muted")
    #expect(s.outcome("m4", "c") == "message")
    // Thread prefs set the chat level only: calls keep the call level.
    #expect(s.outcome("m6", "b") == "call")
  }

  @Test("large channel: more than large_channel_members members, for users who chose nothing")
  func largeChannel() throws {
    // g has 3 members: 3 is not large, 2 is.
    let notLarge = """
      INSERT INTO settings VALUES ('large_channel_members', '3'), ('large_channel_level', 'none');
      """
    #expect(try runV2(notLarge, msg()).outcome("m", "b") == "message")
    let large = """
      INSERT INTO settings VALUES ('large_channel_members', '2'), ('large_channel_level', 'none');
      UPDATE users SET chat_level = 'all' WHERE user_id = 'c';
      """
    let s = try runV2(large, msg(), msg("md", channel: "d"))
    #expect(s.outcome("m", "b") == "-muted")
    // A level the user chose wins, at any of their levels.
    #expect(s.outcome("m", "c") == "message")
    // d has 2 members: not large.
    #expect(s.outcome("md", "b") == "message")
    // member_count counts, not the rows: d (2 rows) declared 3 is large.
    let declared = large + "UPDATE channels SET member_count = 3 WHERE channel_id = 'd';"
    #expect(try runV2(declared, msg("md", channel: "d")).outcome("md", "b") == "-muted")
    // Scope and channel levels are the user's own too; a thread level above all.
    let own =
      large + """
        INSERT INTO scope_prefs (user_id, scope, chat_level) VALUES ('b', 'group', 'all');
        INSERT INTO thread_prefs VALUES ('a', 'g', 't', 'all');
        """
    let t = try runV2(own, msg(sender: "c", #""thread":"t""#))
    #expect(t.outcome("m", "b") == "message")
    #expect(t.outcome("m", "a") == "message")
    // Mentions-only: a mention goes through.
    let mentions = """
      INSERT INTO settings VALUES ('large_channel_members', '2'), ('large_channel_level', 'mentions');
      """
    let u = try runV2(mentions, msg("m", #""mentions":["b"]"#))
    #expect(u.outcome("m", "b") == "mention")
    #expect(u.outcome("m", "c") == "-not_mentioned")
  }

  @Test("kind defaults apply below the large channel and above default_chat_level")
  func kindDefaults() throws {
    let sql = """
      INSERT INTO settings VALUES ('default_chat_level', 'none'), ('default_chat_level.direct', 'all'),
        ('default_chat_level.group', 'mentions'), ('large_channel_members', '3'),
        ('large_channel_level', 'none');
      UPDATE channels SET member_count = 4 WHERE channel_id = 'g';
      """
    let s = try runV2(
      sql, msg("mg", channel: "g", #""mentions":["b"]"#), msg("md", channel: "d"),
      msg("mn", channel: "news"))
    // g is large (4 > 3): large beats the kind default.
    #expect(s.outcome("mg", "b") == "-muted")
    #expect(s.outcome("md", "b") == "message")
    // news: not large, no kind default: default_chat_level.
    #expect(s.outcome("mn", "b") == "-muted")
    // Without the large channel, the group default applies.
    let kinds = """
      INSERT INTO settings VALUES ('default_chat_level', 'none'), ('default_chat_level.group', 'mentions');
      UPDATE users SET chat_level = 'all' WHERE user_id = 'c';
      """
    let t = try runV2(kinds, msg("m", #""mentions":["b"]"#), msg("m2"))
    #expect(t.outcome("m", "b") == "mention")
    #expect(t.outcome("m2", "b") == "-not_mentioned")
    #expect(t.outcome("m2", "c") == "message")
    // Kind defaults set the chat level only.
    let calls = try runV2(
      "INSERT INTO settings VALUES ('default_chat_level.group', 'none');",
      msg("m", #""kind":"call""#))
    #expect(calls.outcome("m", "b") == "call")
  }

  @Test("@all: mention_all_max_members at its edge, mention_all_notifications per level")
  func mentionAll() throws {
    let base = "UPDATE users SET chat_level = 'mentions';"
    // g has 3 members: a limit of 3 keeps @all, 2 drops it.
    let atLimit = base + "INSERT INTO settings VALUES ('mention_all_max_members', '3');"
    #expect(try runV2(atLimit, msg("m", #""mention_all":true"#)).outcome("m", "b") == "mention")
    let above = base + "INSERT INTO settings VALUES ('mention_all_max_members', '2');"
    let s = try runV2(
      above, msg("m", #""mention_all":true"#), msg("md", channel: "d", #""mention_all":true"#),
      msg("m2", #""mention_all":true,"mentions":["b"],"reply_to":"c""#))
    #expect(s.outcome("m", "b") == "-not_mentioned")
    #expect(s.outcome("md", "b") == "mention")
    // Direct mentions and replies still count.
    #expect(s.outcome("m2", "b") == "mention")
    #expect(s.outcome("m2", "c") == "mention")
    // mention_all_notifications: channel → scope → user → 1.
    let levels =
      base + """
        UPDATE users SET mention_all_notifications = 0 WHERE user_id IN ('b', 'c');
        INSERT INTO scope_prefs (user_id, scope, mention_all_notifications) VALUES ('c', 'group', 1);
        INSERT INTO channel_prefs (user_id, channel_id, mention_all_notifications) VALUES ('c', 'g', 0);
        """
    let t = try runV2(
      levels, msg("m", #""mention_all":true"#), msg("mn", channel: "news", #""mention_all":true"#),
      msg("m2", #""mention_all":true,"mentions":["b"]"#),
      msg("m3", sender: "b", #""mention_all":true"#))
    #expect(t.outcome("m", "b") == "-not_mentioned")
    #expect(t.outcome("m", "c") == "-not_mentioned")
    #expect(t.outcome("mn", "c") == "-not_mentioned")
    #expect(t.outcome("m2", "b") == "mention")
    #expect(t.outcome("m3", "a") == "mention")
    // In news (broadcast), c's scope row for groups does not apply: users' 0.
    let u = try runV2(
      levels.replacingOccurrences(of: "'c', 'g', 0", with: "'c', 'news', 1"),
      msg("m", #""mention_all":true"#))
    #expect(u.outcome("m", "c") == "mention")
  }
}
