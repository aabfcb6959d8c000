import FanoutIndex
import FanoutKernel
import FanoutTestSupport
import Foundation
import Testing

@testable import FanoutSnapshot
@testable import FanoutWhatIf

/// `fanout whatif --sql` makes B as an overlay of A when it can: a file
/// holding only the tables the SQL writes. Loaded, it must be the very
/// index a whole copy of A with the SQL applied gives.
@Suite("Scenario overlays")
struct ScenarioOverlayTests {
  private let source = RandomWorld(seed: 11, users: 60, v2: true).makeSnapshot()
  /// The compiled bytes of an index (equal bytes, equal indexes), or the refusal.
  private func outcome(_ load: () throws(SnapshotError) -> Snapshot) throws -> String {
    let snapshot: Snapshot
    do { snapshot = try load() } catch { return "refused: \(error)" }
    let path = makeTemporaryDirectory("fanout-overlay") + "/index.fanout-index"
    try CompiledSnapshot.write(snapshot, key: [1], to: path, mode: 0o600)
    return try #require(FileManager.default.contents(atPath: path)).base64EncodedString()
  }

  /// Applies `sql` both ways and compares the loads: the overlay read whole,
  /// and by its tables alone over the source's rows, against a whole copy.
  /// Returns the scenario's snapshot for more checks.
  @discardableResult
  private func agrees(_ sql: String, source: String? = nil, template: OverlayTemplate? = nil)
    throws -> ScenarioCopy
  {
    let source = source ?? self.source
    let scenario = try ScenarioCopy(of: source, applying: sql, template: template)
    let wholeLoad = Result { () throws(SnapshotError) in
      try SnapshotLoader.load(path: SQLiteFixture.copy(source, applying: sql))
    }
    let whole = try outcome { () throws(SnapshotError) in try wholeLoad.get() }
    let overlaid = try outcome { () throws(SnapshotError) in
      try SnapshotLoader.load(path: scenario.path, base: scenario.base)
    }
    #expect(overlaid == whole, "\(sql)")
    if scenario.base != nil {
      // Taken by the load: kept anew for each.
      let rows = try #require(SnapshotLoader.loadKeepingRows(path: source).rows)
      let byTables = try outcome { () throws(SnapshotError) in
        try SnapshotLoader.load(path: scenario.path, base: scenario.base, over: rows)
      }
      #expect(byTables == whole, "\(sql)")
      // Settings and users' times alone: A's index (read back from its
      // compiled file, as from the index cache) with B's.
      switch try overIndex(scenario, source: source) {
      case .success(nil): break
      case .success(let index?):
        let byIndex = try outcome { () throws(SnapshotError) in
          Snapshot(index: index, info: try wholeLoad.get().info)
        }
        #expect(byIndex == whole, "\(sql)")
      case .failure(let error): #expect("refused: \(error)" == whole, "\(sql)")
      }
    }
    return scenario
  }

  /// The scenario loaded over A's index (nil when it cannot be), A as the index cache gives it: written to a compiled file
  /// and read back.
  private func overIndex(_ scenario: ScenarioCopy, source: String) throws -> Result<
    Index?, SnapshotError
  > {
    let path = makeTemporaryDirectory("fanout-overlay") + "/a.fanout-index"
    try CompiledSnapshot.write(
      SnapshotLoader.load(path: source), key: SnapshotFingerprint.buildKey, to: path, mode: 0o600)
    let a = try SnapshotLoader.load(path: path).index
    do {
      // As `fanout whatif` loads it: with the columns of users the SQL wrote.
      return .success(
        try SnapshotLoader.index(
          overlay: scenario.path, base: source, over: a,
          usersColumnsChanged: scenario.writes.columnsChanged(in: "users")))
    } catch { return .failure(error) }
  }

  @Test(
    "SQL that writes only settings, users, dnd_weekly, channels, members, the levels' rows, devices, categories, mandatory gateways, category preferences, restricted gateways, muted senders, thread levels and presence is A's index with them replaced",
    arguments: [
      (
        """
        INSERT OR REPLACE INTO settings VALUES ('default_quiet_action', 'defer'),
          ('throttle_messages', '2'), ('throttle_window_ms', '60000'), ('presence_delay_ms', '90000'),
          ('mention_all_max_members', '5')
        """, true
      ),
      ("INSERT OR REPLACE INTO settings VALUES ('default_quiet_action', 'drop')", true),
      ("DELETE FROM settings WHERE key LIKE 'throttle%' OR key = 'default_quiet_action'", true),
      (
        "INSERT OR REPLACE INTO settings VALUES ('notification_groups', 'on'), "
          + "('notification_group_count_max', '2')", true
      ),
      // The chat defaults are the channels' (resolved per message), not the slots'.
      ("UPDATE settings SET value = 'mentions' WHERE key = 'default_chat_level'", true),
      (
        "INSERT OR REPLACE INTO settings VALUES ('large_channel_members', '3'), "
          + "('large_channel_level', 'mentions'), ('default_chat_level.direct', 'none')", true
      ),
      // The levels' rows and the call default: the slots' settings built again.
      ("INSERT OR REPLACE INTO settings VALUES ('default_call_level', 'none')", true),
      ("UPDATE users SET show_preview = 0", true),
      ("UPDATE channel_prefs SET chat_level = 'mentions' WHERE chat_level = 'none'", true),
      (
        "UPDATE channel_prefs SET chat_level = 'default', snooze_start = NULL, snooze_until = NULL",
        true
      ),
      ("DELETE FROM channel_prefs WHERE rowid % 2 = 0", true),
      (
        """
        INSERT OR REPLACE INTO channel_prefs (user_id, channel_id, chat_level, snooze_start, snooze_until)
          SELECT user_id, channel_id, 'none', 1700000000000, 4102444800000 FROM members
          WHERE rowid % 5 = 0
        """, true
      ),
      (
        """
        INSERT OR REPLACE INTO scope_prefs (user_id, scope, chat_level, call_level)
          SELECT user_id, 'group', 'mentions', 'none' FROM users WHERE rowid % 2 = 0;
        UPDATE users SET dnd_start = 1320, dnd_end = 480 WHERE dnd_start IS NULL
        """, true
      ),
      (
        """
        UPDATE channel_prefs SET call_level = NULL;
        INSERT OR REPLACE INTO settings VALUES ('default_call_level', 'mentions');
        UPDATE gateway_prefs SET restricted = 1 - restricted
        """, true
      ),
      // Weekly quiet hours: B's users' DND windows.
      (
        """
        INSERT INTO dnd_weekly (user_id, weekday, start_min, end_min)
          SELECT user_id, 6, 0, 1439 FROM users WHERE rowid % 2 = 0
        """, true
      ),
      ("DELETE FROM dnd_weekly WHERE rowid % 2 = 1", true),
      // (Refused: weekday 9.)
      ("INSERT INTO dnd_weekly VALUES ((SELECT user_id FROM users LIMIT 1), 9, 0, 60)", true),
      // Members: B's slots built from its members over A's channels.
      ("DELETE FROM members WHERE rowid % 7 = 0", true),
      (
        """
        INSERT OR IGNORE INTO members (channel_id, user_id)
          SELECT c.channel_id, u.user_id FROM channels AS c, users AS u
          WHERE u.rowid % 9 = 0 AND c.rowid % 5 = 0
        """, true
      ),  // (refused where a channel's member_count falls below its rows)
      (
        """
        DELETE FROM members WHERE rowid % 3 = 0;
        UPDATE channel_prefs SET chat_level = 'none' WHERE rowid % 2 = 0;
        UPDATE users SET quiet_action = 'defer' WHERE rowid % 2 = 0
        """, true
      ),
      ("UPDATE members SET user_id = 'nobody' WHERE rowid = 3", true),  // refused
      // Devices: B's device columns built from its rows, under A's gateways.
      ("DELETE FROM devices WHERE device_id % 3 = 0", true),
      ("UPDATE devices SET token = token || '-2' WHERE device_id % 2 = 0", true),
      (
        """
        DELETE FROM devices WHERE device_id % 4 = 1;
        UPDATE gateway_prefs SET restricted = 1 - restricted;
        UPDATE users SET dnd_start = 1320, dnd_end = 480 WHERE dnd_start IS NULL
        """, true
      ),
      (
        "UPDATE devices SET gateway = 'pigeon' WHERE device_id = (SELECT min(device_id) FROM devices)",
        true
      ),
      ("UPDATE devices SET user_id = 'nobody' WHERE device_id % 5 = 0", true),  // refused
      ("UPDATE channel_prefs SET chat_level = 'loud' WHERE rowid = 2", true),  // refused
      ("UPDATE channel_prefs SET channel_id = 'nowhere' WHERE rowid = 1", true),  // refused
      ("UPDATE scope_prefs SET scope = 'galaxy' WHERE rowid = 1", true),  // refused
      ("UPDATE users SET dnd_start = 1320, dnd_end = 480 WHERE dnd_start IS NULL", true),
      ("UPDATE users SET timezone = 'Asia/Tokyo' WHERE rowid % 3 = 0", true),
      ("UPDATE users SET quiet_action = 'defer' WHERE rowid % 2 = 0", true),
      (
        """
        UPDATE users SET dnd_start = NULL, dnd_end = NULL;
        INSERT OR REPLACE INTO settings VALUES ('default_quiet_action', 'defer')
        """, true
      ),
      ("UPDATE users SET timezone = 'Nowhere/City' WHERE rowid = 2", true),  // refused as whole
      ("UPDATE users SET dnd_start = 10 WHERE rowid = 2 AND dnd_end IS NULL", true),  // refused
      ("UPDATE users SET chat_level = 'loud' WHERE rowid = 3", true),  // refused
      ("UPDATE users SET user_id = user_id || '-renamed' WHERE rowid % 7 = 0", false),
      ("UPDATE users SET snooze_until = 4102444800000", true),
      ("DELETE FROM category_prefs WHERE rowid % 2 = 0", true),
      (
        """
        INSERT OR REPLACE INTO category_prefs (user_id, category, gateway, preference)
          SELECT user_id, (SELECT category FROM categories ORDER BY category LIMIT 1), NULL,
            'opt_out' FROM users
        """, true
      ),
      (
        """
        UPDATE users SET timezone = 'Asia/Tokyo' WHERE rowid % 3 = 0;
        UPDATE category_prefs SET preference = 'opt_in' WHERE rowid % 2 = 1
        """, true
      ),
      ("UPDATE category_prefs SET preference = 'maybe' WHERE rowid = 1", true),  // refused
      ("UPDATE category_prefs SET user_id = 'nobody' WHERE rowid = 1", true),  // refused
      (
        """
        INSERT INTO category_prefs (user_id, category, gateway, preference)
          SELECT user_id, (SELECT category FROM categories LIMIT 1), 'pigeon', 'opt_in'
          FROM users LIMIT 3
        """, true
      ),
      ("UPDATE gateway_prefs SET restricted = 1 - restricted", true),
      (
        """
        INSERT OR REPLACE INTO gateway_prefs (user_id, gateway, restricted)
          SELECT user_id, 'email', 1 FROM users WHERE rowid % 2 = 0;
        DELETE FROM category_prefs WHERE rowid % 3 = 0
        """, true
      ),
      ("UPDATE gateway_prefs SET restricted = 7 WHERE rowid = 1", true),  // refused
      // Categories: their defaults and mandatory flags, under A's names.
      ("UPDATE categories SET default_preference = 'opt_in'", true),
      ("UPDATE categories SET mandatory = 1 - mandatory WHERE rowid % 2 = 1", true),
      (
        """
        UPDATE categories SET default_preference = 'opt_out' WHERE rowid % 2 = 0;
        UPDATE users SET dnd_start = 1320, dnd_end = 480 WHERE dnd_start IS NULL;
        DELETE FROM devices WHERE device_id % 4 = 1
        """, true
      ),
      ("UPDATE categories SET default_preference = 'maybe' WHERE rowid = 1", true),  // refused
      ("INSERT INTO categories VALUES ('brand-new', 'opt_in', 0)", false),
      ("UPDATE categories SET category = category || '-renamed' WHERE rowid = 1", false),
      // Mandatory gateways: B's gateways numbered again.
      ("UPDATE category_gateways SET mandatory = 1 - mandatory", true),
      ("DELETE FROM category_gateways WHERE rowid % 2 = 0", true),
      (
        "INSERT INTO category_gateways (category, gateway, mandatory) "
          + "SELECT category, 'pigeon', 1 FROM categories", true
      ),
      ("UPDATE category_gateways SET mandatory = 5 WHERE rowid = 1", true),  // refused
      ("UPDATE category_gateways SET category = 'nothing' WHERE rowid = 1", true),  // refused
      // Channels: their kinds and member counts, the slots built again.
      ("UPDATE channels SET kind = 'group' WHERE kind = 'broadcast'", true),
      ("UPDATE channels SET kind = 'broadcast' WHERE rowid % 3 = 0", true),
      ("UPDATE channels SET member_count = 100000 WHERE rowid % 2 = 0", true),
      (
        """
        UPDATE channels SET kind = 'group' WHERE rowid % 2 = 1;
        DELETE FROM members WHERE rowid % 7 = 0;
        INSERT OR REPLACE INTO settings VALUES ('large_channel_members', '3'),
          ('large_channel_level', 'mentions')
        """, true
      ),
      ("UPDATE channels SET kind = 'lounge' WHERE rowid = 1", true),  // refused
      ("UPDATE channels SET member_count = 1 WHERE rowid = 2", true),  // refused
      ("INSERT INTO channels (channel_id, kind) VALUES ('brand-new', 'group')", false),
      // The tables a whole load reads last: muted senders, thread levels, presence.
      ("DELETE FROM user_mutes WHERE rowid % 2 = 0", true),
      (
        """
        INSERT OR IGNORE INTO user_mutes (user_id, muted_user_id)
          SELECT a.user_id, b.user_id FROM users AS a, users AS b
          WHERE a.rowid % 7 = 0 AND b.rowid % 5 = 1 AND a.user_id <> b.user_id
        """, true
      ),
      ("UPDATE user_mutes SET muted_user_id = 'nobody' WHERE rowid = 1", true),  // refused
      ("UPDATE thread_prefs SET chat_level = 'none'", true),
      (
        """
        INSERT OR IGNORE INTO thread_prefs (user_id, channel_id, thread_id, chat_level)
          SELECT user_id, channel_id, 'new-thread', 'mentions' FROM members WHERE rowid % 3 = 0
        """, true
      ),
      ("UPDATE thread_prefs SET chat_level = 'loud' WHERE rowid = 1", true),  // refused
      ("DELETE FROM presence WHERE rowid % 2 = 1", true),
      (
        """
        INSERT INTO presence (user_id, active_from, active_until)
          SELECT user_id, 1700000000000, 4102444800000 FROM users WHERE rowid % 4 = 0;
        UPDATE users SET dnd_start = 1320, dnd_end = 480 WHERE dnd_start IS NULL
        """, true
      ),
      ("UPDATE presence SET user_id = 'nobody' WHERE rowid = 1", true),  // refused
      (
        """
        DELETE FROM devices WHERE device_id % 3 = 0;
        UPDATE categories SET mandatory = 1;
        DELETE FROM user_mutes;
        DELETE FROM presence WHERE rowid % 3 = 0
        """, true
      ),
      (
        "INSERT OR REPLACE INTO gateway_prefs (user_id, gateway, restricted) "
          + "SELECT user_id, 'pigeon', 1 FROM users LIMIT 2", true
      ),
    ])
  func overAsIndex(_ sql: String, _ expected: Bool) throws {
    let scenario = try agrees(sql)
    switch try overIndex(scenario, source: source) {
    case .success(let index): #expect((index != nil) == expected, "\(sql)")
    case .failure: #expect(expected, "\(sql): refused where it should have been nil")
    }
  }

  @Test(
    "the columns a scenario's SQL may change are those its UPDATEs set; none once it adds or removes rows",
    arguments: [
      (
        "UPDATE users SET dnd_start = 1320, dnd_end = 480 WHERE dnd_start IS NULL",
        "dnd_end,dnd_start"
      ),
      (
        "UPDATE users SET Chat_Level = 'mentions'; UPDATE users SET timezone = 'UTC'",
        "chat_level,timezone"
      ),
      ("UPDATE users SET (snooze_start, snooze_until) = (0, 1)", "snooze_start,snooze_until"),
      ("INSERT OR REPLACE INTO settings VALUES ('default_quiet_action', 'defer')", ""),
      ("DELETE FROM users WHERE rowid = 1", nil),
      (
        "INSERT INTO users (user_id) VALUES ('zz') ON CONFLICT DO UPDATE SET chat_level = 'none'",
        nil
      ),
    ])
  func columnsChanged(_ sql: String, _ expected: String?) throws {
    let scenario = try ScenarioCopy(of: source, applying: sql)
    let columns = scenario.writes.columnsChanged(in: "users")
    #expect(columns.map { $0.sorted().joined(separator: ",") } == expected, "\(sql)")
  }

  /// The tables in the scenario's own file.
  private func tables(_ scenario: ScenarioCopy) -> String? { tables(scenario.path) }

  private func tables(_ file: String) -> String? {
    SQLiteSession(file).value(
      "SELECT group_concat(name, ',') FROM (SELECT name FROM sqlite_master "
        + "WHERE type = 'table' ORDER BY name)")
  }

  @Test(
    "an overlay holds only the tables written, and loads as a whole copy would",
    arguments: [
      (
        """
        DELETE FROM devices WHERE gateway = (SELECT gateway FROM devices GROUP BY gateway
          ORDER BY count(*) LIMIT 1)
        """, "devices"
      ),
      ("UPDATE users SET dnd_start = 1320, dnd_end = 480 WHERE dnd_start IS NULL", "users"),
      (
        """
        DELETE FROM devices WHERE device_id % 3 = 0;
        UPDATE users SET chat_level = 'mentions'
          WHERE user_id IN (SELECT user_id FROM members GROUP BY user_id HAVING count(*) > 2)
        """, "devices,users"
      ),
      (
        """
        BEGIN;
        INSERT OR REPLACE INTO channel_prefs (user_id, channel_id, chat_level)
          SELECT user_id, channel_id, 'none' FROM members WHERE rowid % 4 = 0;
        UPDATE channel_prefs SET show_preview = 0 WHERE chat_level = 'none';
        COMMIT
        """, "channel_prefs"
      ),
      (
        "INSERT INTO devices (user_id, gateway, token) SELECT user_id, 'fcm', 'new-' || user_id FROM users",
        "devices"
      ),
      ("UPDATE devices SET gateway = 'zz' || gateway WHERE device_id % 2 = 0", "devices"),
      ("UPDATE gateway_prefs SET gateway = 'aa' WHERE rowid % 2 = 0", "gateway_prefs"),
      ("UPDATE gateway_prefs SET restricted = 1 - restricted", "gateway_prefs"),
      ("DELETE FROM members WHERE rowid % 5 = 0", "members"),
      ("UPDATE channels SET kind = 'broadcast' WHERE rowid % 3 = 0", "channels"),
      ("UPDATE categories SET default_preference = 'opt_out'", "categories"),
      ("DELETE FROM category_prefs WHERE rowid % 2 = 0", "category_prefs"),
      ("DELETE FROM category_gateways", "category_gateways"),
      ("UPDATE scope_prefs SET chat_level = 'none' WHERE scope = 'group'", "scope_prefs"),
      ("DELETE FROM dnd_weekly WHERE weekday = 3", "dnd_weekly"),
      ("DELETE FROM presence WHERE rowid % 2 = 0", "presence"),
      ("DELETE FROM user_mutes WHERE rowid % 2 = 0", "user_mutes"),
      ("DELETE FROM thread_prefs WHERE rowid % 3 = 0", "thread_prefs"),
      // Settings apply to the source's rows at build time.
      ("UPDATE settings SET value = 'mentions' WHERE key = 'default_chat_level'", "settings"),
      // The channels' default chat levels alone (the slots kept), the
      // quiet action alone (the users' records made again).
      (
        "INSERT OR REPLACE INTO settings VALUES ('default_chat_level.group', 'none'), "
          + "('large_channel_members', '3'), ('large_channel_level', 'mentions')", "settings"
      ),
      ("INSERT OR REPLACE INTO settings VALUES ('default_quiet_action', 'defer')", "settings"),
      (
        """
        INSERT OR REPLACE INTO settings VALUES ('default_quiet_action', 'defer'),
          ('default_call_level', 'none'), ('default_chat_level.group', 'none'),
          ('large_channel_members', '3'), ('large_channel_level', 'mentions'),
          ('throttle_messages', '2'), ('throttle_window_ms', '60000')
        """, "settings"
      ),
      (
        "INSERT OR REPLACE INTO settings VALUES ('notification_groups', 'on'), "
          + "('notification_group_size_max', '2')", "settings"
      ),
      (
        "UPDATE devices SET gateway = 'updates' WHERE device_id % 5 = 0",
        "devices"
      ),
      (
        "INSERT OR REPLACE INTO settings VALUES ('notification_groups', 'on'); "
          + "UPDATE devices SET gateway = 'updates' WHERE device_id % 5 = 0", "devices,settings"
      ),
      ("UPDATE settings SET value = 'loud' WHERE key = 'default_chat_level'", "settings"),
      // Read whole: users other than the source's.
      ("INSERT INTO users (user_id) VALUES ('zz-new')", "users"),
      ("DELETE FROM users WHERE user_id = (SELECT min(user_id) FROM members)", "users"),
      ("UPDATE users SET user_id = user_id || '-renamed' WHERE rowid % 7 = 0", "users"),
      // Refused, as a whole load refuses it.
      ("UPDATE users SET chat_level = 'loud' WHERE rowid = 3", "users"),
      ("UPDATE members SET user_id = 'nobody' WHERE rowid = 7", "members"),
      ("INSERT INTO devices (user_id, gateway, token) VALUES ('nobody', 'apns', 'x')", "devices"),
    ])
  func overlay(_ sql: String, _ written: String) throws {
    let scenario = try agrees(sql)
    #expect(scenario.base == source)
    #expect(tables(scenario) == written)
  }

  @Test(
    "SQL an overlay cannot answer as a whole copy would runs on a whole copy",
    arguments: [
      """
      CREATE TABLE quiet AS SELECT user_id FROM users ORDER BY user_id LIMIT 3;
      UPDATE users SET dnd_start = 0, dnd_end = 60 WHERE user_id IN (SELECT user_id FROM quiet);
      DROP TABLE quiet
      """,
      "UPDATE main.users SET show_preview = 0",
      "UPDATE users SET show_preview = (SELECT count(*) FROM sqlite_master) % 2",
      "CREATE INDEX users_zone ON users(timezone); UPDATE users SET show_preview = 0",
    ])
  func wholeCopy(_ sql: String) throws {
    let scenario = try agrees(sql)
    #expect(scenario.base == nil)
    #expect(tables(scenario)?.contains("members") == true)
  }

  @Test("a source with a trigger is copied whole, and the trigger fires")
  func trigger() throws {
    let source = SQLiteFixture.copy(
      self.source,
      applying: """
        CREATE TRIGGER silence AFTER UPDATE OF chat_level ON users
        BEGIN DELETE FROM devices WHERE user_id = new.user_id; END
        """)
    let sql = "UPDATE users SET chat_level = 'none' WHERE rowid % 2 = 0"
    let scenario = try agrees(sql, source: source)
    #expect(scenario.base == nil)
    let devices = SQLiteSession(scenario.path).value("SELECT count(*) FROM devices")
    #expect(devices != SQLiteSession(source).value("SELECT count(*) FROM devices"))
  }

  @Test("a copied table keeps the source's rowids, gaps and all")
  func rowidsKept() throws {
    // Rowids apart and not from 1: a copy numbering its rows anew would
    // pick other users for the scenario's WHERE than the whole copy does.
    let source = SQLiteFixture.copy(
      self.source, applying: "UPDATE users SET rowid = rowid * 3 + 100")
    let scenario = try agrees(
      "UPDATE users SET chat_level = 'none' WHERE rowid % 2 = 0", source: source)
    #expect(scenario.base == source)
    let rowids = "SELECT group_concat(rowid) FROM (SELECT rowid FROM users ORDER BY rowid)"
    #expect(SQLiteSession(scenario.path).value(rowids) == SQLiteSession(source).value(rowids))
  }

  @Test("a table too large to copy faster than the whole file is copied with the file")
  func large() throws {
    // device_id is the rowid: a span of 9M rows by the estimate.
    let source = SQLiteFixture.copy(
      self.source,
      applying: """
        INSERT INTO devices (device_id, user_id, gateway, token)
          SELECT 9000000, user_id, 'apns', 'far' FROM users LIMIT 1
        """)
    let scenario = try agrees("UPDATE devices SET token = token || '-2'", source: source)
    #expect(scenario.base == nil)
    #expect(try agrees("UPDATE users SET show_preview = 0", source: source).base == source)
  }

  @Test(
    "turning groups on over a source with a gateway named 'updates' is refused, as a whole load refuses it"
  )
  func groupsOnOverUpdatesGateway() throws {
    let source = SQLiteFixture.copy(
      self.source, applying: "UPDATE devices SET gateway = 'updates' WHERE device_id % 5 = 0")
    let scenario = try agrees(
      "INSERT OR REPLACE INTO settings VALUES ('notification_groups', 'on')", source: source)
    #expect(tables(scenario) == "settings")
    #expect(try overIndex(scenario, source: source).get() == nil)
  }

  @Test(
    "a bad row of dnd_weekly, members, the levels' or devices' tables over A's index is refused, naming table and column, as a whole load refuses it",
    arguments: [
      (
        "UPDATE channel_prefs SET chat_level = 'loud' WHERE rowid = 2", "channel_prefs",
        "chat_level"
      ),
      (
        "UPDATE channel_prefs SET channel_id = 'nowhere' WHERE rowid = 1", "channel_prefs",
        "channel_id"
      ),
      (
        "INSERT INTO scope_prefs (user_id, scope) SELECT user_id, 'galaxy' FROM users LIMIT 1",
        "scope_prefs", "scope"
      ),
      ("UPDATE users SET call_level = 'ring' WHERE rowid = 4", "users", "call_level"),
      ("UPDATE devices SET user_id = 'nobody' WHERE device_id % 5 = 0", "devices", "user_id"),
      ("UPDATE members SET user_id = 'nobody' WHERE rowid = 3", "members", "user_id"),
      (
        "INSERT INTO dnd_weekly VALUES ((SELECT user_id FROM users LIMIT 1), 9, 0, 60)",
        "dnd_weekly", "weekday"
      ),
    ])
  func levelsRefused(_ sql: String, _ table: String, _ column: String) throws {
    let scenario = try agrees(sql)
    guard case .failure(let error) = try overIndex(scenario, source: source) else {
      Issue.record("\(sql): not refused")
      return
    }
    #expect(error.table == table && error.column == column, "\(sql): \(error)")
  }

  @Test(
    "a gateway gone from B (its devices deleted, or the only preference naming it) is gone from B's index, as from a whole load"
  )
  func gatewayGone() throws {
    let source = SQLiteFixture.copy(
      self.source,
      applying: "INSERT INTO gateway_prefs (user_id, gateway, restricted) "
        + "SELECT user_id, 'pigeon', 1 FROM users LIMIT 2")
    let a = try SnapshotLoader.load(path: source).index
    // A gateway of the devices that no category makes mandatory.
    let gateway = try #require(
      SQLiteSession(source).value(
        "SELECT gateway FROM devices WHERE gateway NOT IN (SELECT gateway FROM category_gateways) "
          + "GROUP BY gateway ORDER BY count(*) LIMIT 1"))
    for sql in [
      "DELETE FROM gateway_prefs WHERE gateway = 'pigeon'",
      """
      DELETE FROM gateway_prefs WHERE gateway = '\(gateway)';
      DELETE FROM category_prefs WHERE gateway = '\(gateway)';
      DELETE FROM devices WHERE gateway = '\(gateway)'
      """,
    ] {
      let scenario = try agrees(sql, source: source)
      let b = try #require(try overIndex(scenario, source: source).get(), "\(sql)")
      #expect(b.gateways.count == a.gateways.count - 1, "\(sql)")
    }
  }

  @Test(
    "the tables SQL will write are forecast without running it",
    arguments: [
      ("INSERT OR REPLACE INTO settings VALUES ('default_quiet_action', 'defer')", "settings"),
      (
        "BEGIN; UPDATE Settings SET value = '2' WHERE key = 'throttle_messages'; COMMIT", "settings"
      ),
      (
        "UPDATE users SET show_preview = 0; DELETE FROM devices WHERE device_id = 1",
        "devices,users"
      ),
      ("SELECT 1", ""), ("-- nothing", ""), ("", ""),
      ("CREATE TABLE t (x); INSERT INTO t VALUES (1)", nil),
      ("PRAGMA user_version = 3", nil),
      ("UPDATE no_such_table SET x = 1", nil),
    ] as [(String, String?)])
  func forecast(_ sql: String, _ expected: String?) {
    let tables = ScenarioCopy.tablesWritten(by: sql, in: source)
    #expect(tables.map { $0.sorted().joined(separator: ",") } == expected, "\(sql)")
  }

  @Test(
    "a sweep's scenarios that write the same tables start from one copy of them, and load as whole copies would",
    arguments: [
      "UPDATE users SET dnd_start = 1320, dnd_end = 480 WHERE dnd_start IS NULL",
      "UPDATE users SET quiet_action = 'defer' WHERE rowid % 2 = 0",
      "DELETE FROM users WHERE user_id = (SELECT min(user_id) FROM members)",
      "INSERT INTO users (user_id) VALUES ('zz-new')",
      "UPDATE users SET chat_level = 'loud' WHERE rowid = 3",
      "UPDATE main.users SET show_preview = 0",
      "UPDATE users SET show_preview = 0; DELETE FROM devices WHERE device_id % 3 = 0",
      "INSERT OR REPLACE INTO settings VALUES ('default_quiet_action', 'defer')",
      "CREATE INDEX users_zone ON users(timezone); UPDATE users SET show_preview = 0",
    ])
  func template(_ sql: String) throws {
    let forecast = ScenarioCopy.tablesWritten(by: sql, in: source)
    let templates = OverlayTemplate.shared(
      by: [forecast, nil, forecast, ["thread_prefs"]], source: source)
    #expect(templates[1] == nil && templates[3] == nil, "one scenario alone has none")
    guard let forecast else {
      #expect(templates[0] == nil, "\(sql): no forecast, no template")
      return
    }
    let template = try #require(templates[0], "\(sql)")
    #expect(templates[2] === template)
    let file = try #require(template.file, "\(sql)")
    #expect(tables(file) == forecast.sorted().joined(separator: ","), "\(sql)")
    for _ in 0..<2 { try agrees(sql, template: template) }
  }

  @Test("a template whose tables the overlay will not copy is none: each scenario copies its own")
  func templateRefused() throws {
    // A's stored schema for users is not one CREATE statement each.
    let source = SQLiteFixture.copy(
      self.source,
      applying: "CREATE INDEX i ON users(timezone); PRAGMA writable_schema = ON; "
        + "UPDATE sqlite_master SET sql = 'CREATE INDEX i ON users(timezone); SELECT 1' "
        + "WHERE name = 'i'")
    let templates = OverlayTemplate.shared(by: [["users"], ["users"]], source: source)
    #expect(try #require(templates[0]).file == nil)
    #expect {
      try ScenarioCopy(
        of: source, applying: "UPDATE users SET show_preview = 0", template: templates[0])
    } throws: { error in
      guard case .refused(let reason) = error as? WhatIfError.Scenario else { return false }
      return reason.contains("stored schema")
    }
  }

  @Test("a template's folder is gone with it")
  func templateRemoved() throws {
    var templates = OverlayTemplate.shared(by: [["users"], ["users"]], source: source)
    let file = try #require(templates[0]?.file)
    #expect(FileManager.default.fileExists(atPath: file))
    templates = []
    #expect(!FileManager.default.fileExists(atPath: file))
    #expect(!FileManager.default.fileExists(atPath: (file as NSString).deletingLastPathComponent))
  }

  @Test("a refusal on an overlay is the scenario's refusal")
  func refused() {
    #expect {
      try ScenarioCopy(
        of: source, applying: "UPDATE users SET show_preview = 0; PRAGMA user_version = 3")
    } throws: { error in
      guard case .refused = error as? WhatIfError.Scenario else { return false }
      return true
    }
  }

  @Test("the source is never written")
  func sourceUntouched() throws {
    let before = FileManager.default.contents(atPath: source)
    try agrees("UPDATE users SET chat_level = 'all'; DELETE FROM members WHERE rowid % 2 = 1")
    #expect(FileManager.default.contents(atPath: source) == before)
  }

  /// A B whose SQL changed only what the ledgers read takes A's evaluation
  /// before them as its own (`fanout whatif` then never evaluates it);
  /// any other change, or a B read from a file, is evaluated.
  @Test(
    "rules 0–7 decide alike only where the SQL changed only rule 8's and groups' settings; B defers more only where it changed only the default quiet action"
  )
  func decidesAlikeBeforeLedgers() throws {
    let a = try SnapshotLoader.load(path: source).index
    func b(_ sql: String) throws -> Index {
      let scenario = try ScenarioCopy(of: source, applying: sql)
      return try #require(try SnapshotLoader.index(overlay: scenario.path, base: source, over: a))
    }
    let throttle = try b(
      "INSERT OR REPLACE INTO settings VALUES ('throttle_messages', '2'), ('throttle_window_ms', '60000')"
    )
    #expect(throttle.decidesAlikeBeforeLedgers(a) && a.decidesAlikeBeforeLedgers(throttle))
    let groups = try b(
      "INSERT OR REPLACE INTO settings VALUES ('notification_groups', 'on'), ('notification_group_size_max', '2')"
    )
    #expect(groups.decidesAlikeBeforeLedgers(a) && groups.decidesAlikeBeforeLedgers(throttle))
    #expect(a.decidesAlikeBeforeLedgers(a))
    for sql in [
      "INSERT OR REPLACE INTO settings VALUES ('default_quiet_action', 'defer')",
      "INSERT OR REPLACE INTO settings VALUES ('presence_action', 'suppress')",
      "UPDATE users SET dnd_start = 0, dnd_end = 60",
      "DELETE FROM devices WHERE rowid % 2 = 0",
    ] {
      let other = try b(sql)
      #expect(!other.decidesAlikeBeforeLedgers(a), "\(sql)")
      #expect(!other.decidesAlikeBeforeLedgers(throttle), "\(sql)")
    }
    let whole = try SnapshotLoader.load(
      path: SQLiteFixture.copy(
        source,
        applying:
          "INSERT OR REPLACE INTO settings VALUES ('throttle_messages', '2'), ('throttle_window_ms', '60000')"
      )
    ).index
    #expect(!whole.decidesAlikeBeforeLedgers(a))

    // Deferring where A drops: the default quiet action alone, no ledgers.
    let deferring = try b(
      "INSERT OR REPLACE INTO settings VALUES ('default_quiet_action', 'defer')")
    #expect(deferring.defersMoreThan(a) && !a.defersMoreThan(deferring))
    let drop = try b("INSERT OR REPLACE INTO settings VALUES ('default_quiet_action', 'drop')")
    #expect(deferring.defersMoreThan(drop) && drop.defersMoreThan(a))
    for sql in [
      "INSERT OR REPLACE INTO settings VALUES ('default_quiet_action', 'defer'), ('presence_action', 'suppress')",
      "INSERT OR REPLACE INTO settings VALUES ('default_quiet_action', 'defer'), ('throttle_messages', '2'), ('throttle_window_ms', '60000')",
      "UPDATE users SET quiet_action = 'defer'",
    ] {
      #expect(try !b(sql).defersMoreThan(a), "\(sql)")
    }
    #expect(!throttle.defersMoreThan(a))

    // Other quiet hours alone: DND windows, daily or weekly, and quiet actions.
    for sql in [
      "UPDATE users SET dnd_start = 0, dnd_end = 60",
      "UPDATE users SET quiet_action = 'defer'",
      "INSERT INTO dnd_weekly SELECT user_id, 1, 0, 60 FROM users",
    ] {
      let other = try b(sql)
      #expect(other.differsOnlyInQuietHours(from: a) && a.differsOnlyInQuietHours(from: other))
      let change = try #require(QuietHoursChange(other, from: a), "\(sql)")
      #expect(change.users > 0, "\(sql)")
    }
    #expect(a.differsOnlyInQuietHours(from: a) && QuietHoursChange(a, from: a)?.users == 0)
    for sql in [
      "UPDATE users SET timezone = 'Asia/Tokyo'",
      "UPDATE users SET chat_level = 'none'",
      "UPDATE users SET dnd_start = 0, dnd_end = 60; DELETE FROM devices WHERE rowid % 2 = 0",
      "INSERT OR REPLACE INTO settings VALUES ('default_quiet_action', 'defer')",
    ] {
      #expect(try !b(sql).differsOnlyInQuietHours(from: a), "\(sql)")
    }
    #expect(!throttle.differsOnlyInQuietHours(from: a))
  }
}
