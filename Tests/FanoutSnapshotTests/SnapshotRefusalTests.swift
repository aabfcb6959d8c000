import FanoutSnapshot
import FanoutTestSupport
import Testing

/// A valid population every refusal case breaks in one place.
private let valid = """
  INSERT INTO settings VALUES ('schema_version', '1');
  INSERT INTO users (user_id, timezone) VALUES ('u1', 'Asia/Shanghai'), ('u2', NULL);
  INSERT INTO channels VALUES ('c1', 'group');
  INSERT INTO members VALUES ('c1', 'u1'), ('c1', 'u2');
  INSERT INTO devices VALUES (1, 'u1', 'apns', 't1');
  INSERT INTO categories VALUES ('news', 'opt_in', 0);

  """

private func load(_ sql: String, schema: String = SQLiteFixture.schema) -> Result<
  Snapshot, SnapshotError
> {
  Result { () throws(SnapshotError) in
    try SnapshotLoader.load(path: SQLiteFixture.make(sql, schema: schema))
  }
}

/// One user 'u1' and one group channel 'c': what the ordering cases add to.
private let oneUserOneChannel = """
  INSERT INTO settings VALUES ('schema_version', '1');
  INSERT INTO users (user_id) VALUES ('u1');
  INSERT INTO channels VALUES ('c', 'group');

  """

/// For each case (rows, table, key, column): loads `oneUserOneChannel` plus
/// the rows and checks that the refusal names that table, key and column.
private func expectRefused(_ cases: [(String, String, String, String)]) {
  for (sql, table, key, column) in cases {
    guard case .failure(let error) = load(oneUserOneChannel + sql) else {
      Issue.record("accepted: \(sql)")
      continue
    }
    #expect(error.table == table, "\(sql)")
    #expect(error.key == key, "\(sql)")
    #expect(error.column == column, "\(sql)")
  }
}

struct Refusal: CustomStringConvertible, Sendable {
  let what: String
  let sql: String
  let table: String
  let key: String?
  let column: String?
  /// A laxer definition of `table`, for values SQLite's own constraints would stop.
  var definition: String? = nil
  var description: String { what }
}

@Suite("Snapshot refusals")
struct SnapshotRefusalTests {
  static let cases: [Refusal] = [
    Refusal(
      what: "wrong type: blob id", sql: "INSERT INTO users (user_id) VALUES (X'7531');",
      table: "users", key: "user_id=<blob>", column: "user_id"),
    Refusal(
      what: "wrong type: integer in an untyped column",
      sql: "INSERT INTO channels VALUES (7, 'group');", table: "channels", key: "channel_id=7",
      column: "channel_id", definition: "CREATE TABLE channels (channel_id PRIMARY KEY, kind);\n"),
    Refusal(
      what: "wrong type: text in an INTEGER column",
      sql: "INSERT INTO users (user_id, snooze_until) VALUES ('u3', 'soon');", table: "users",
      key: "user_id='u3'", column: "snooze_until"),
    Refusal(
      what: "wrong type: REAL minute",
      sql: "INSERT INTO users (user_id, dnd_start, dnd_end) VALUES ('u3', 1.5, 20);",
      table: "users", key: "user_id='u3'", column: "dnd_start"),
    Refusal(
      what: "invalid UTF-8 in an id",
      sql: "INSERT INTO users (user_id) VALUES (CAST(X'75FF80FE' AS TEXT));", table: "users",
      key: "user_id='u\u{FFFD}\u{FFFD}\u{FFFD}'", column: "user_id"),
    Refusal(
      what: "invalid UTF-8 in a token (an overlong '/')",
      sql: "INSERT INTO devices VALUES (2, 'u2', 'fcm', CAST(X'C0AF' AS TEXT));",
      table: "devices", key: "device_id=2", column: "token"),
    Refusal(
      what: "a gateway name longer than 64 bytes",
      sql: "INSERT INTO devices VALUES (2, 'u2', '\(String(repeating: "g", count: 65))', 't2');",
      table: "devices", key: "device_id=2", column: "gateway"),
    Refusal(
      what: "NULL key", sql: "INSERT INTO users (user_id) VALUES (NULL);", table: "users",
      key: "user_id=NULL", column: "user_id"),
    Refusal(
      what: "NULL in NOT NULL", sql: "UPDATE channels SET kind = NULL;", table: "channels",
      key: "channel_id='c1'", column: "kind",
      definition: "CREATE TABLE channels (channel_id TEXT PRIMARY KEY, kind TEXT);\n"),
    Refusal(
      what: "duplicate member", sql: "INSERT INTO members VALUES ('c1', 'u1');", table: "members",
      key: "channel_id='c1', user_id='u1'", column: nil,
      definition: "CREATE TABLE members (channel_id TEXT, user_id TEXT);\n"),
    Refusal(
      what: "duplicate (gateway, token)",
      sql: "INSERT INTO devices VALUES (2, 'u2', 'apns', 't1');", table: "devices",
      key: "device_id=2", column: "token",
      definition:
        "CREATE TABLE devices (device_id INTEGER PRIMARY KEY, user_id TEXT, gateway TEXT, token TEXT);\n"
    ),
    Refusal(
      what: "unknown chat level", sql: "UPDATE users SET chat_level = 'loud' WHERE user_id = 'u1';",
      table: "users", key: "user_id='u1'", column: "chat_level"),
    Refusal(
      what: "upper-case enum", sql: "UPDATE users SET chat_level = 'All' WHERE user_id = 'u1';",
      table: "users", key: "user_id='u1'", column: "chat_level"),
    Refusal(
      what: "'default' outside channel_prefs",
      sql: "UPDATE users SET chat_level = 'default' WHERE user_id = 'u1';", table: "users",
      key: "user_id='u1'", column: "chat_level"),
    Refusal(
      what: "'default' in scope_prefs",
      sql:
        "INSERT INTO scope_prefs (user_id, scope, chat_level) VALUES ('u1', 'group', 'default');",
      table: "scope_prefs", key: "user_id='u1', scope='group'", column: "chat_level"),
    Refusal(
      what: "call level 'mentions'",
      sql: "UPDATE users SET call_level = 'mentions' WHERE user_id = 'u2';", table: "users",
      key: "user_id='u2'", column: "call_level"),
    Refusal(
      what: "unknown scope", sql: "INSERT INTO scope_prefs (user_id, scope) VALUES ('u1', 'team');",
      table: "scope_prefs", key: "user_id='u1', scope='team'", column: "scope"),
    Refusal(
      what: "unknown channel kind", sql: "INSERT INTO channels VALUES ('c2', 'forum');",
      table: "channels", key: "channel_id='c2'", column: "kind"),
    Refusal(
      what: "0/1 column holding 2", sql: "UPDATE users SET show_preview = 2 WHERE user_id = 'u1';",
      table: "users", key: "user_id='u1'", column: "show_preview"),
    Refusal(
      what: "0/1 column in channel_prefs",
      sql:
        "INSERT INTO channel_prefs (user_id, channel_id, mention_notifications) VALUES ('u1', 'c1', -1);",
      table: "channel_prefs", key: "user_id='u1', channel_id='c1'", column: "mention_notifications"),
    Refusal(
      what: "minute 1440",
      sql: "UPDATE users SET dnd_start = 10, dnd_end = 1440 WHERE user_id = 'u1';", table: "users",
      key: "user_id='u1'", column: "dnd_end"),
    Refusal(
      what: "negative minute",
      sql: "UPDATE users SET dnd_start = -1, dnd_end = 10 WHERE user_id = 'u1';", table: "users",
      key: "user_id='u1'", column: "dnd_start"),
    Refusal(
      what: "only dnd_start", sql: "UPDATE users SET dnd_start = 10 WHERE user_id = 'u1';",
      table: "users", key: "user_id='u1'", column: "dnd_end"),
    Refusal(
      what: "only dnd_end", sql: "UPDATE users SET dnd_end = 10 WHERE user_id = 'u1';",
      table: "users", key: "user_id='u1'", column: "dnd_start"),
    Refusal(
      what: "weekly start = end", sql: "INSERT INTO dnd_weekly VALUES ('u1', 1, 600, 600);",
      table: "dnd_weekly", key: "user_id='u1', weekday=1, start_min=600", column: "end_min"),
    Refusal(
      what: "weekly start > end", sql: "INSERT INTO dnd_weekly VALUES ('u1', 1, 700, 600);",
      table: "dnd_weekly", key: "user_id='u1', weekday=1, start_min=700", column: "end_min"),
    Refusal(
      what: "weekday 0", sql: "INSERT INTO dnd_weekly VALUES ('u1', 0, 10, 20);",
      table: "dnd_weekly", key: "user_id='u1', weekday=0, start_min=10", column: "weekday"),
    Refusal(
      what: "weekday 8", sql: "INSERT INTO dnd_weekly VALUES ('u1', 8, 10, 20);",
      table: "dnd_weekly", key: "user_id='u1', weekday=8, start_min=10", column: "weekday"),
    Refusal(
      what: "weekly minute out of range", sql: "INSERT INTO dnd_weekly VALUES ('u1', 2, 10, 1500);",
      table: "dnd_weekly", key: "user_id='u1', weekday=2, start_min=10", column: "end_min"),
    Refusal(
      what: "unknown time zone",
      sql: "UPDATE users SET timezone = 'Mars/Olympus' WHERE user_id = 'u1';", table: "users",
      key: "user_id='u1'", column: "timezone"),
    Refusal(
      what: "time zone names are case-sensitive",
      sql: "UPDATE users SET timezone = 'asia/shanghai' WHERE user_id = 'u1';", table: "users",
      key: "user_id='u1'", column: "timezone"),
    Refusal(
      what: "time zone path escape",
      sql: "UPDATE users SET timezone = '../zoneinfo/UTC' WHERE user_id = 'u1';", table: "users",
      key: "user_id='u1'", column: "timezone"),
    Refusal(
      what: "member names an unknown user", sql: "INSERT INTO members VALUES ('c1', 'ghost');",
      table: "members", key: "channel_id='c1', user_id='ghost'", column: "user_id"),
    Refusal(
      what: "member names an unknown channel", sql: "INSERT INTO members VALUES ('c9', 'u1');",
      table: "members", key: "channel_id='c9', user_id='u1'", column: "channel_id"),
    Refusal(
      what: "channel_prefs names an unknown channel",
      sql: "INSERT INTO channel_prefs (user_id, channel_id) VALUES ('u1', 'c9');",
      table: "channel_prefs", key: "user_id='u1', channel_id='c9'", column: "channel_id"),
    Refusal(
      what: "device of an unknown user",
      sql: "INSERT INTO devices VALUES (2, 'ghost', 'fcm', 't2');", table: "devices",
      key: "device_id=2", column: "user_id"),
    Refusal(
      what: "scope_prefs of an unknown user",
      sql: "INSERT INTO scope_prefs (user_id, scope) VALUES ('ghost', 'group');",
      table: "scope_prefs", key: "user_id='ghost', scope='group'", column: "user_id"),
    Refusal(
      what: "dnd_weekly of an unknown user",
      sql: "INSERT INTO dnd_weekly VALUES ('ghost', 1, 1, 2);", table: "dnd_weekly",
      key: "user_id='ghost', weekday=1, start_min=1", column: "user_id"),
    Refusal(
      what: "category_prefs with an unknown category",
      sql: "INSERT INTO category_prefs VALUES ('u1', 'promo', NULL, 'opt_in');",
      table: "category_prefs", key: "user_id='u1', category='promo', gateway=NULL",
      column: "category"),
    Refusal(
      what: "category_gateways with an unknown category",
      sql: "INSERT INTO category_gateways VALUES ('promo', 'apns', 1);", table: "category_gateways",
      key: "category='promo', gateway='apns'", column: "category"),
    Refusal(
      what: "gateway_prefs of an unknown user",
      sql: "INSERT INTO gateway_prefs VALUES ('ghost', 'apns', 1);", table: "gateway_prefs",
      key: "user_id='ghost', gateway='apns'", column: "user_id"),
    Refusal(
      what: "two category_prefs rows for one (user, category, NULL)",
      sql:
        "INSERT INTO category_prefs VALUES ('u1', 'news', NULL, 'opt_in'), ('u1', 'news', NULL, 'opt_out');",
      table: "category_prefs", key: "user_id='u1', category='news', gateway=NULL", column: nil),
    Refusal(
      what: "two category_prefs rows for one (user, category, gateway)",
      sql:
        "INSERT INTO category_prefs VALUES ('u1', 'news', 'apns', 'opt_in'), ('u1', 'news', 'apns', 'opt_in');",
      table: "category_prefs", key: "user_id='u1', category='news', gateway='apns'", column: nil),
    Refusal(
      what: "unknown preference",
      sql: "INSERT INTO category_prefs VALUES ('u1', 'news', NULL, 'maybe');",
      table: "category_prefs", key: "user_id='u1', category='news', gateway=NULL",
      column: "preference"),
    Refusal(
      what: "unknown default preference",
      sql: "INSERT INTO categories VALUES ('promo', 'opt-in', 0);", table: "categories",
      key: "category='promo'", column: "default_preference"),
    Refusal(
      what: "mandatory not 0/1", sql: "INSERT INTO categories VALUES ('promo', 'opt_in', 3);",
      table: "categories", key: "category='promo'", column: "mandatory"),
    Refusal(
      what: "restricted not 0/1", sql: "INSERT INTO gateway_prefs VALUES ('u1', 'apns', 2);",
      table: "gateway_prefs", key: "user_id='u1', gateway='apns'", column: "restricted"),
    Refusal(
      what: "schema_version 2",
      sql: "UPDATE settings SET value = '2' WHERE key = 'schema_version';", table: "settings",
      key: "key='schema_version'", column: "value"),
    Refusal(
      what: "bad default_chat_level",
      sql: "INSERT INTO settings VALUES ('default_chat_level', 'loud');", table: "settings",
      key: "key='default_chat_level'", column: "value"),
    Refusal(
      what: "default_call_level 'mentions'",
      sql: "INSERT INTO settings VALUES ('default_call_level', 'mentions');", table: "settings",
      key: "key='default_call_level'", column: "value"),
    Refusal(
      what: "upper-case gateway", sql: "INSERT INTO devices VALUES (2, 'u1', 'APNS', 't2');",
      table: "devices", key: "device_id=2", column: "gateway"),
    Refusal(
      what: "gateway with a slash", sql: "INSERT INTO devices VALUES (2, 'u1', 'a/b', 't2');",
      table: "devices", key: "device_id=2", column: "gateway"),
    Refusal(
      what: "gateway starting with a dot",
      sql: "INSERT INTO devices VALUES (2, 'u1', '.hidden', 't2');", table: "devices",
      key: "device_id=2", column: "gateway"),
    Refusal(
      what: "gateway 'decisions'", sql: "INSERT INTO devices VALUES (2, 'u1', 'decisions', 't2');",
      table: "devices", key: "device_id=2", column: "gateway"),
    Refusal(
      what: "gateway 'summary'", sql: "INSERT INTO devices VALUES (2, 'u1', 'summary', 't2');",
      table: "devices", key: "device_id=2", column: "gateway"),
    Refusal(
      what: "gateway 'rejected'", sql: "INSERT INTO devices VALUES (2, 'u1', 'rejected', 't2');",
      table: "devices", key: "device_id=2", column: "gateway"),
  ]

  @Test("refused with table, key and column named", arguments: cases)
  func refused(_ refusal: Refusal) throws {
    let schema =
      refusal.definition.map { Self.schema(replacing: refusal.table, with: $0) }
      ?? SQLiteFixture.schema
    let result = load(valid + refusal.sql, schema: schema)
    guard case .failure(let error) = result else {
      Issue.record("accepted a snapshot with \(refusal.what)")
      return
    }
    #expect(error.table == refusal.table, "\(error)")
    #expect(error.key == refusal.key, "\(error)")
    #expect(error.column == refusal.column, "\(error)")
    #expect(error.description.hasPrefix("snapshot refused: table \(refusal.table)"))
  }

  /// The schema with one table's definition replaced (or dropped).
  static func schema(
    replacing table: String, with definition: String, in schema: String = SQLiteFixture.schema
  )
    -> String
  {
    let parts = schema.components(separatedBy: "CREATE TABLE ")
    return parts[0]
      + parts.dropFirst().map { $0.hasPrefix(table + " (") ? definition : "CREATE TABLE " + $0 }
      .joined()
  }

  @Test(
    "a missing required table is refused",
    arguments: ["users", "channels", "members", "channel_prefs", "devices"])
  func missingTable(_ table: String) {
    let sql = "INSERT INTO settings VALUES ('schema_version', '1');"
    guard case .failure(let error) = load(sql, schema: Self.schema(replacing: table, with: ""))
    else {
      Issue.record("accepted a snapshot without \(table)")
      return
    }
    #expect(error.table == table)
    #expect(error.reason == "missing table")
  }

  @Test("optional tables may be absent")
  func optionalTables() throws {
    var reduced = SQLiteFixture.schema
    for table in [
      "settings", "scope_prefs", "dnd_weekly", "categories", "category_gateways", "category_prefs",
      "gateway_prefs",
    ] {
      reduced = Self.schema(replacing: table, with: "", in: reduced)
    }
    let snapshot = try load("INSERT INTO users (user_id) VALUES ('u');", schema: reduced).get()
    #expect(snapshot.index.users.count == 1)
    #expect(
      snapshot.info.rowCounts.map(\.table) == [
        "users", "channels", "members", "channel_prefs", "devices",
      ])
  }

  @Test("a missing column is refused, naming it")
  func missingColumn() {
    let schema = Self.schema(
      replacing: "devices",
      with: "CREATE TABLE devices (device_id INTEGER PRIMARY KEY, user_id TEXT, gateway TEXT);\n")
    guard case .failure(let error) = load("", schema: schema) else {
      Issue.record("accepted devices without token")
      return
    }
    #expect(error.table == "devices")
    #expect(error.column == "token")
  }

  @Test("extra tables, columns and settings keys are ignored; an empty snooze window is accepted")
  func lenient() throws {
    let sql =
      valid + """
        CREATE TABLE audit (x); ALTER TABLE users ADD COLUMN nickname TEXT;
        UPDATE users SET nickname = 'x', snooze_start = 50, snooze_until = 10;
        INSERT INTO settings VALUES ('theme', 'dark');
        """
    let snapshot = try load(sql).get()
    #expect(snapshot.index.users.count == 2)
    #expect(snapshot.info.snoozeGroups == 0)
  }

  @Test("members read in two ranges report the error a single ordered scan meets first")
  func memberRangesReportInOrder() {
    // Both halves of the members table hold an unknown user; 'a' sorts first.
    var sql = "INSERT INTO settings VALUES ('schema_version', '1');\n"
    sql += "INSERT INTO users (user_id) VALUES ('u1'), ('u2');\n"
    for c in ["a", "b", "y", "z"] {
      sql += "INSERT INTO channels VALUES ('\(c)', 'group');\n"
      sql += "INSERT INTO members VALUES ('\(c)', 'u1'), ('\(c)', 'u2');\n"
    }
    sql += "INSERT INTO members VALUES ('z', 'ghost-z'), ('a', 'ghost-a');\n"
    guard case .failure(let error) = load(sql) else {
      Issue.record("accepted members naming unknown users")
      return
    }
    #expect(error.key == "channel_id='a', user_id='ghost-a'")
    #expect(error.column == "user_id")
  }

  @Test("ids looked up in batches: the error a row-by-row scan meets first is reported")
  func batchedLookupsReportInOrder() {
    // Each case: an unknown id, then (same row or a later one) a fault found
    // without a lookup. The later fault must not be reported first.
    let cases = [
      (
        "INSERT INTO members VALUES ('c', 'ghost'), ('zz', 'u1');", "members",
        "channel_id='c', user_id='ghost'", "user_id"
      ),
      (
        "INSERT INTO devices VALUES (1, 'ghost', 'apns', 't1'), (2, 'u1', 'Bad!', 't2');",
        "devices", "device_id=1", "user_id"
      ),
      (
        "INSERT INTO devices VALUES (1, 'ghost', 'Bad!', 't1');", "devices", "device_id=1",
        "user_id"
      ),
      (
        """
        INSERT INTO channel_prefs (user_id, channel_id) VALUES ('u1', 'gone');
        INSERT INTO channel_prefs (user_id, channel_id, chat_level) VALUES ('u1', 'c', 'loud');
        """,
        "channel_prefs", "user_id='u1', channel_id='gone'", "channel_id"
      ),
      (
        "INSERT INTO channel_prefs (user_id, channel_id, chat_level) VALUES ('ghost', 'c', 'loud');",
        "channel_prefs", "user_id='ghost', channel_id='c'", "user_id"
      ),
    ]
    expectRefused(cases)
  }

  @Test("channels, devices and channel_prefs, read aside, report where a serial load meets them")
  func tablesReadAsideReportInTableOrder() {
    let badMembers = "INSERT INTO members VALUES ('c', 'nobody');\n"
    let goodMembers = "INSERT INTO members VALUES ('c', 'u1');\n"
    let badPrefs = "INSERT INTO channel_prefs (user_id, channel_id) VALUES ('u1', 'gone');\n"
    let badDevice = "INSERT INTO devices VALUES (1, 'ghost', 'apns', 't1');\n"
    let badChannel = "INSERT INTO channels VALUES ('d', 'weird');\n"
    // In table order: users, dnd_weekly, channels, members, channel_prefs, devices.
    let cases = [
      (
        "INSERT INTO users (user_id, chat_level) VALUES ('u2', 'loud');\n" + badChannel,
        "users", "user_id='u2'", "chat_level"
      ),
      (
        "INSERT INTO dnd_weekly VALUES ('u1', 9, 0, 10);\n" + badChannel, "dnd_weekly",
        "user_id='u1', weekday=9, start_min=0", "weekday"
      ),
      (badChannel + badMembers + badDevice, "channels", "channel_id='d'", "kind"),
      (badMembers + badPrefs + badDevice, "members", "channel_id='c', user_id='nobody'", "user_id"),
      (
        goodMembers + badPrefs + badDevice, "channel_prefs", "user_id='u1', channel_id='gone'",
        "channel_id"
      ),
      (goodMembers + badDevice, "devices", "device_id=1", "user_id"),
    ]
    expectRefused(cases)
  }

  /// One bad row per table; with two bad tables, the one listed first in
  /// the schema is named, whatever the load reads first or aside.
  @Test("with bad rows in any two tables, the earlier table's error wins")
  func everyPairOfTables() {
    let bad: [(table: String, sql: String)] = [
      ("settings", "INSERT INTO settings VALUES ('default_chat_level', 'loud');"),
      ("users", "INSERT INTO users (user_id, chat_level) VALUES ('u2', 'loud');"),
      ("dnd_weekly", "INSERT INTO dnd_weekly VALUES ('u1', 9, 0, 10);"),
      ("channels", "INSERT INTO channels VALUES ('d', 'room');"),
      ("members", "INSERT INTO members VALUES ('c', 'ghost');"),
      ("scope_prefs", "INSERT INTO scope_prefs (user_id, scope) VALUES ('u1', 'room');"),
      (
        "channel_prefs",
        "INSERT INTO channel_prefs (user_id, channel_id, chat_level) VALUES ('u1', 'c', 'loud');"
      ),
      ("devices", "INSERT INTO devices VALUES (1, 'u1', 'Bad Gateway', 't');"),
      ("categories", "INSERT INTO categories VALUES ('news', 'maybe', 0);"),
      ("category_gateways", "INSERT INTO category_gateways VALUES ('ghost', 'apns', 1);"),
      ("category_prefs", "INSERT INTO category_prefs VALUES ('u1', 'ghost', NULL, 'opt_in');"),
      ("gateway_prefs", "INSERT INTO gateway_prefs VALUES ('u1', 'apns', 7);"),
    ]
    for (i, first) in bad.enumerated() {
      guard case .failure(let alone) = load(oneUserOneChannel + first.sql + "\n") else {
        Issue.record("accepted: \(first.sql)")
        continue
      }
      #expect(alone.table == first.table, "\(first.sql)")
      for second in bad[(i + 1)...] {
        let sql = oneUserOneChannel + second.sql + "\n" + first.sql + "\n"
        guard case .failure(let error) = load(sql) else {
          Issue.record("accepted: \(sql)")
          continue
        }
        #expect(error == alone, "\(first.table) before \(second.table): \(error)")
      }
    }
  }

  @Test("a file that is not a database, or does not exist, is refused")
  func notADatabase() {
    let dir = makeTemporaryDirectory()
    let path = dir + "/junk.sqlite"
    try! "not sqlite at all, just text".write(toFile: path, atomically: true, encoding: .utf8)
    // SQLite's own result code (26, SQLITE_NOTADB) and the SQL travel with the refusal.
    #expect {
      try SnapshotLoader.load(path: path)
    } throws: { error in
      guard let error = error as? SnapshotError, let sqlite = error.sqlite else { return false }
      return sqlite.code == 26 && sqlite.sql != nil
        && error.description.hasSuffix("(SQLite result code 26)")
    }
    #expect(throws: SnapshotError.self) { try SnapshotLoader.load(path: dir + "/missing.sqlite") }
  }
}

/// The contract's schema with every PRIMARY KEY and UNIQUE constraint taken
/// out: what a hand-made snapshot may declare. Duplicate keys must then be
/// found by the load itself.
private let keylessSchema: String = SQLiteFixture.v2Schema
  .replacingOccurrences(
    of: #",([ \t]*--[^\n]*)?\s*(PRIMARY KEY|UNIQUE) \([^)]*\)"#, with: "$1",
    options: .regularExpression
  )
  .replacingOccurrences(of: " PRIMARY KEY", with: "")

/// `valid`, its rows named by column (the v2 schema has more columns).
private let validV2 = """
  INSERT INTO settings VALUES ('schema_version', '1');
  INSERT INTO users (user_id) VALUES ('u1'), ('u2');
  INSERT INTO channels (channel_id, kind) VALUES ('c1', 'group');
  INSERT INTO members VALUES ('c1', 'u1'), ('c1', 'u2');
  INSERT INTO devices VALUES (1, 'u1', 'apns', 't1');
  INSERT INTO categories VALUES ('news', 'opt_in', 0);

  """

@Suite("duplicate keys, whatever the schema declares")
struct DuplicateKeyTests {
  @Test(
    "a key given twice is refused in every table, naming the table",
    arguments: [
      (
        "settings",
        "INSERT INTO settings VALUES ('default_chat_level', 'all'), ('default_chat_level', 'none');"
      ),
      ("users", "INSERT INTO users (user_id) VALUES ('u2');"),
      ("channels", "INSERT INTO channels (channel_id, kind) VALUES ('c1', 'direct');"),
      ("members", "INSERT INTO members VALUES ('c1', 'u1');"),
      (
        "scope_prefs",
        "INSERT INTO scope_prefs (user_id, scope) VALUES ('u1', 'group'), ('u1', 'group');"
      ),
      (
        "channel_prefs",
        "INSERT INTO channel_prefs (user_id, channel_id) VALUES ('u1', 'c1'), ('u1', 'c1');"
      ),
      ("devices", "INSERT INTO devices VALUES (1, 'u2', 'fcm', 't9');"),
      ("categories", "INSERT INTO categories VALUES ('news', 'opt_out', 0);"),
      (
        "category_gateways",
        "INSERT INTO category_gateways VALUES ('news', 'apns', 1), ('news', 'apns', 0);"
      ),
      ("gateway_prefs", "INSERT INTO gateway_prefs VALUES ('u1', 'apns', 1), ('u1', 'apns', 0);"),
      ("user_mutes", "INSERT INTO user_mutes VALUES ('u1', 'u2'), ('u1', 'u2');"),
      (
        "thread_prefs",
        "INSERT INTO thread_prefs VALUES ('u1', 'c1', 't', 'all'), ('u1', 'c1', 't', 'none');"
      ),
    ])
  func duplicate(table: String, rows: String) {
    #expect(!keylessSchema.contains("PRIMARY KEY") && !keylessSchema.contains("UNIQUE"))
    guard case .failure(let error) = load(validV2 + rows, schema: keylessSchema) else {
      Issue.record("\(table): a duplicate key was accepted")
      return
    }
    #expect(error.table == table, "\(error)")
    #expect(error.reason.contains("duplicate key"), "\(error)")
  }
}

@Suite("only plain tables are read")
struct PlainTableTests {
  @Test("a contract table that is a view is refused, even one whose query never ends")
  func view() {
    let endless = """
      CREATE VIEW users AS WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n)
        SELECT 'u' || i AS user_id, NULL AS timezone, NULL AS chat_level, NULL AS call_level,
        NULL AS snooze_start, NULL AS snooze_until, NULL AS dnd_start, NULL AS dnd_end,
        NULL AS mention_notifications, NULL AS pinned_notifications, NULL AS show_preview FROM n;
      """
    let schema = SnapshotRefusalTests.schema(replacing: "users", with: endless)
    let started = ContinuousClock.now
    guard case .failure(let error) = load(SQLiteFixture.header, schema: schema) else {
      Issue.record("a view was loaded")
      return
    }
    #expect(error.table == "users")
    #expect(error.reason.contains("is a view"), "\(error)")
    #expect(ContinuousClock.now - started < .seconds(5))
  }

  @Test("a contract table that is a virtual table is refused")
  func virtualTable() {
    let schema = SnapshotRefusalTests.schema(
      replacing: "channels", with: "CREATE VIRTUAL TABLE channels USING fts5(channel_id, kind);")
    guard case .failure(let error) = load(SQLiteFixture.header, schema: schema) else {
      Issue.record("a virtual table was loaded")
      return
    }
    if error.reason.contains("no such module") {
      print("skipped: this SQLite has no fts5")
      return
    }
    #expect(error.table == "channels")
    #expect(error.reason.contains("is a virtual table"), "\(error)")
  }
}
