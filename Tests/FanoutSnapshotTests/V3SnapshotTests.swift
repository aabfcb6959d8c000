import FanoutModel
import FanoutSnapshot
import FanoutTestSupport
import Testing

/// A valid population that each v3 refusal breaks in one place.
private let valid = """
  INSERT INTO settings VALUES ('schema_version', '1');
  INSERT INTO users (user_id) VALUES ('u1'), ('u2');
  INSERT INTO channels (channel_id, kind) VALUES ('c1', 'group');
  INSERT INTO members VALUES ('c1', 'u1'), ('c1', 'u2');

  """

private func load(_ sql: String) -> Result<Snapshot, SnapshotError> {
  Result { () throws(SnapshotError) in
    try SnapshotLoader.load(path: SQLiteFixture.make(valid + sql, schema: SQLiteFixture.v2Schema))
  }
}

@Suite("Contract v3 snapshot additions: the notification group keys")
struct V3SnapshotTests {
  /// Refused like v2's (`V2SnapshotTests.refused` runs these too).
  static let refusals: [Refusal] = [
    Refusal(
      what: "notification_groups outside off/on",
      sql: "INSERT INTO settings VALUES ('notification_groups', 'yes');", table: "settings",
      key: "key='notification_groups'", column: "value"),
    Refusal(
      what: "notification_groups in capitals",
      sql: "INSERT INTO settings VALUES ('notification_groups', 'ON');", table: "settings",
      key: "key='notification_groups'", column: "value"),
    Refusal(
      what: "a size cap of 0",
      sql:
        "INSERT INTO settings VALUES ('notification_groups', 'on'), ('notification_group_size_max', '0');",
      table: "settings", key: "key='notification_group_size_max'", column: "value"),
    Refusal(
      what: "a count cap with a leading zero",
      sql:
        "INSERT INTO settings VALUES ('notification_groups', 'on'), ('notification_group_count_max', '03');",
      table: "settings", key: "key='notification_group_count_max'", column: "value"),
    Refusal(
      what: "a size cap without the groups",
      sql: "INSERT INTO settings VALUES ('notification_group_size_max', '3');", table: "settings",
      key: "key='notification_group_size_max'", column: "notification_groups"),
    Refusal(
      what: "a count cap with the groups off",
      sql:
        "INSERT INTO settings VALUES ('notification_groups', 'off'), ('notification_group_count_max', '3');",
      table: "settings", key: "key='notification_group_count_max'", column: "notification_groups"),
    Refusal(
      what: "a gateway named updates with the groups on",
      sql: """
        INSERT INTO settings VALUES ('notification_groups', 'on');
        INSERT INTO devices VALUES (7, 'u1', 'updates', 't');
        """, table: "devices", key: "device_id=7", column: "gateway"),
  ]

  @Test("accepted: the keys at their bounds; a gateway named updates while the groups are off")
  func accepted() throws {
    let on = try load(
      """
      INSERT INTO settings VALUES ('notification_groups', 'on'),
        ('notification_group_size_max', '1'),
        ('notification_group_count_max', '9223372036854775807');
      """
    ).get()
    #expect(
      on.index.settings.notificationGroups == .init(sizeMax: 1, countMax: 9_223_372_036_854_775_807)
    )
    let off = try load(
      """
      INSERT INTO settings VALUES ('notification_groups', 'off');
      INSERT INTO devices VALUES (7, 'u1', 'updates', 't');
      """
    ).get()
    #expect(off.index.settings.notificationGroups == nil)
    #expect(try load("").get().index.settings.notificationGroups == nil)
  }
}
