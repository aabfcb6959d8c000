import FanoutModel
import FanoutSnapshot
import FanoutTestSupport
import Testing

/// A valid v2 population (on the schema with v2's optional columns and
/// tables) that each refusal case breaks in one place.
private let valid = """
  INSERT INTO settings VALUES ('schema_version', '1');
  INSERT INTO users (user_id) VALUES ('u1'), ('u2');
  INSERT INTO channels (channel_id, kind) VALUES ('c1', 'group');
  INSERT INTO members VALUES ('c1', 'u1'), ('c1', 'u2');

  """

private func load(_ sql: String, schema: String = SQLiteFixture.v2Schema) -> Result<
  Snapshot, SnapshotError
> {
  Result { () throws(SnapshotError) in
    try SnapshotLoader.load(path: SQLiteFixture.make(sql, schema: schema))
  }
}

@Suite("Contract v2 snapshot additions: settings keys, optional columns and tables")
struct V2SnapshotTests {
  static let refusals: [Refusal] = [
    Refusal(
      what: "a kind default outside its domain",
      sql: "INSERT INTO settings VALUES ('default_chat_level.group', 'some');", table: "settings",
      key: "key='default_chat_level.group'", column: "value"),
    Refusal(
      what: "large_channel_level 'all'",
      sql:
        "INSERT INTO settings VALUES ('large_channel_members', '5'), ('large_channel_level', 'all');",
      table: "settings", key: "key='large_channel_level'", column: "value"),
    Refusal(
      what: "a leading zero", sql: "INSERT INTO settings VALUES ('mention_all_max_members', '05');",
      table: "settings", key: "key='mention_all_max_members'", column: "value"),
    Refusal(
      what: "a sign", sql: "INSERT INTO settings VALUES ('mention_all_max_members', '+5');",
      table: "settings", key: "key='mention_all_max_members'", column: "value"),
    Refusal(
      what: "zero where at least 1",
      sql: "INSERT INTO settings VALUES ('throttle_messages', '0'), ('throttle_window_ms', '10');",
      table: "settings", key: "key='throttle_messages'", column: "value"),
    Refusal(
      what: "above Int64",
      sql: "INSERT INTO settings VALUES ('mention_all_max_members', '9223372036854775808');",
      table: "settings", key: "key='mention_all_max_members'", column: "value"),
    Refusal(
      what: "a space", sql: "INSERT INTO settings VALUES ('mention_all_max_members', ' 5');",
      table: "settings", key: "key='mention_all_max_members'", column: "value"),
    Refusal(
      what: "presence_delay_ms above 7 days",
      sql: "INSERT INTO settings VALUES ('presence_delay_ms', '604800001');", table: "settings",
      key: "key='presence_delay_ms'", column: "value"),
    Refusal(
      what: "presence_action unknown",
      sql: "INSERT INTO settings VALUES ('presence_action', 'Delay');",
      table: "settings", key: "key='presence_action'", column: "value"),
    Refusal(
      what: "default_quiet_action unknown",
      sql: "INSERT INTO settings VALUES ('default_quiet_action', 'later');", table: "settings",
      key: "key='default_quiet_action'", column: "value"),
    Refusal(
      what: "large_channel_members alone",
      sql: "INSERT INTO settings VALUES ('large_channel_members', '5');", table: "settings",
      key: "key='large_channel_members'", column: "value"),
    Refusal(
      what: "large_channel_level alone",
      sql: "INSERT INTO settings VALUES ('large_channel_level', 'none');", table: "settings",
      key: "key='large_channel_level'", column: "value"),
    Refusal(
      what: "throttle_window_ms alone",
      sql: "INSERT INTO settings VALUES ('throttle_window_ms', '60000');",
      table: "settings", key: "key='throttle_window_ms'", column: "value"),
    Refusal(
      what: "mention_all_notifications 2 in users",
      sql: "UPDATE users SET mention_all_notifications = 2 WHERE user_id = 'u2';", table: "users",
      key: "user_id='u2'", column: "mention_all_notifications"),
    Refusal(
      what: "mention_all_notifications text in scope_prefs",
      sql:
        "INSERT INTO scope_prefs (user_id, scope, mention_all_notifications) VALUES ('u1', 'group', 'yes');",
      table: "scope_prefs", key: "user_id='u1', scope='group'", column: "mention_all_notifications"),
    Refusal(
      what: "mention_all_notifications -1 in channel_prefs",
      sql:
        "INSERT INTO channel_prefs (user_id, channel_id, mention_all_notifications) VALUES ('u1', 'c1', -1);",
      table: "channel_prefs", key: "user_id='u1', channel_id='c1'",
      column: "mention_all_notifications"),
    Refusal(
      what: "quiet_action unknown",
      sql: "UPDATE users SET quiet_action = 'Defer' WHERE user_id = 'u1';",
      table: "users", key: "user_id='u1'", column: "quiet_action"),
    Refusal(
      what: "member_count below the members",
      sql: "UPDATE channels SET member_count = 1;", table: "channels", key: "channel_id='c1'",
      column: "member_count"),
    Refusal(
      what: "member_count negative", sql: "UPDATE channels SET member_count = -1;",
      table: "channels", key: "channel_id='c1'", column: "member_count"),
    Refusal(
      what: "member_count as text", sql: "UPDATE channels SET member_count = 'many';",
      table: "channels", key: "channel_id='c1'", column: "member_count"),
    Refusal(
      what: "user_mutes: unknown muted user",
      sql: "INSERT INTO user_mutes VALUES ('u1', 'ghost');", table: "user_mutes",
      key: "user_id='u1', muted_user_id='ghost'", column: "muted_user_id"),
    Refusal(
      what: "user_mutes: NULL", sql: "INSERT INTO user_mutes VALUES ('u1', NULL);",
      table: "user_mutes", key: "user_id='u1', muted_user_id=NULL", column: "muted_user_id",
      definition: "CREATE TABLE user_mutes (user_id TEXT, muted_user_id TEXT);\n"),
    Refusal(
      what: "user_mutes: a duplicate",
      sql: "INSERT INTO user_mutes VALUES ('u1', 'u2'), ('u1', 'u2');",
      table: "user_mutes", key: "user_id='u1', muted_user_id='u2'", column: nil,
      definition: "CREATE TABLE user_mutes (user_id TEXT, muted_user_id TEXT);\n"),
    Refusal(
      what: "thread_prefs: unknown channel",
      sql: "INSERT INTO thread_prefs VALUES ('u1', 'nope', 't', 'all');", table: "thread_prefs",
      key: "user_id='u1', channel_id='nope', thread_id='t'", column: "channel_id"),
    Refusal(
      what: "thread_prefs: chat level 'default'",
      sql: "INSERT INTO thread_prefs VALUES ('u1', 'c1', 't', 'default');", table: "thread_prefs",
      key: "user_id='u1', channel_id='c1', thread_id='t'", column: "chat_level"),
    Refusal(
      what: "thread_prefs: NULL chat level",
      sql: "INSERT INTO thread_prefs VALUES ('u1', 'c1', 't', NULL);", table: "thread_prefs",
      key: "user_id='u1', channel_id='c1', thread_id='t'", column: "chat_level",
      definition: "CREATE TABLE thread_prefs (user_id, channel_id, thread_id, chat_level);\n"),
    Refusal(
      what: "thread_prefs: integer thread id",
      sql: "INSERT INTO thread_prefs VALUES ('u1', 'c1', 7, 'all');", table: "thread_prefs",
      key: "user_id='u1', channel_id='c1', thread_id=7", column: "thread_id",
      definition: "CREATE TABLE thread_prefs (user_id, channel_id, thread_id, chat_level);\n"),
    Refusal(
      what: "presence: unknown user", sql: "INSERT INTO presence VALUES ('ghost', 1, 2);",
      table: "presence", key: "user_id='ghost', active_from=1, active_until=2", column: "user_id"),
    Refusal(
      what: "presence: NULL until", sql: "INSERT INTO presence VALUES ('u1', 1, NULL);",
      table: "presence", key: "user_id='u1', active_from=1, active_until=NULL",
      column: "active_until",
      definition: "CREATE TABLE presence (user_id, active_from, active_until);\n"),
    Refusal(
      what: "presence: text from", sql: "INSERT INTO presence VALUES ('u1', 'now', 2);",
      table: "presence", key: "user_id='u1', active_from='now', active_until=2",
      column: "active_from"),
    Refusal(
      what: "thread_prefs: a duplicate",
      sql: "INSERT INTO thread_prefs VALUES ('u1', 'c1', 't', 'all'), ('u1', 'c1', 't', 'none');",
      table: "thread_prefs", key: "user_id='u1', channel_id='c1', thread_id='t'", column: nil,
      definition: "CREATE TABLE thread_prefs (user_id, channel_id, thread_id, chat_level);\n"),
  ]

  @Test(
    "refused with table, key and column named (contract v3's keys too)",
    arguments: refusals + V3SnapshotTests.refusals)
  func refused(_ refusal: Refusal) throws {
    let schema =
      refusal.definition.map {
        SnapshotRefusalTests.schema(replacing: refusal.table, with: $0, in: SQLiteFixture.v2Schema)
      } ?? SQLiteFixture.v2Schema
    guard case .failure(let error) = load(valid + refusal.sql, schema: schema) else {
      Issue.record("accepted a snapshot with \(refusal.what)")
      return
    }
    #expect(error.table == refusal.table, "\(error)")
    #expect(error.key == refusal.key, "\(error)")
    #expect(error.column == refusal.column, "\(error)")
  }

  @Test("the paired key that is missing is named in the reason")
  func pairedKeys() throws {
    guard
      case .failure(let error) = load(
        valid + "INSERT INTO settings VALUES ('throttle_messages', '3');")
    else {
      Issue.record("accepted throttle_messages alone")
      return
    }
    #expect(error.reason.contains("throttle_window_ms"), "\(error)")
  }

  @Test(
    "accepted: every key at its bounds, a self-mute, thread_prefs of a non-member, member_count at the rows"
  )
  func accepted() throws {
    let sql =
      valid + """
        INSERT INTO users (user_id) VALUES ('u3');
        INSERT INTO settings VALUES ('default_chat_level.direct', 'all'),
          ('default_chat_level.group', 'mentions'), ('default_chat_level.broadcast', 'none'),
          ('large_channel_members', '1'), ('large_channel_level', 'mentions'),
          ('mention_all_max_members', '9223372036854775807'), ('presence_action', 'delay'),
          ('presence_delay_ms', '0'), ('default_quiet_action', 'defer'),
          ('throttle_messages', '1'), ('throttle_window_ms', '1');
        UPDATE channels SET member_count = 2;
        UPDATE users SET mention_all_notifications = 0, quiet_action = 'drop' WHERE user_id = 'u1';
        INSERT INTO user_mutes VALUES ('u1', 'u1'), ('u3', 'u1');
        INSERT INTO thread_prefs VALUES ('u3', 'c1', '', 'none');
        INSERT INTO presence VALUES ('u1', 10, 5);
        """
    let snapshot = try load(sql).get()
    let settings = snapshot.index.settings
    #expect(settings.kindChatLevel == [.all, .mentions, Level.none])
    #expect(settings.largeChannel == AppSettings.LargeChannel(members: 1, level: .mentions))
    #expect(settings.mentionAllMaxMembers == .max)
    #expect(settings.throttle?.messages == 1)
    #expect(snapshot.index.channelSize(0) == 2)
    #expect(
      snapshot.info.rowCounts.map(\.table).suffix(3) == ["user_mutes", "thread_prefs", "presence"])
  }

  @Test("a v1 snapshot (no v2 column or table) loads as before")
  func v1Schema() throws {
    let snapshot = try load(valid, schema: SQLiteFixture.schema).get()
    #expect(snapshot.index.channelSize(0) == 2)
    #expect(snapshot.index.settings == AppSettings())
  }
}
