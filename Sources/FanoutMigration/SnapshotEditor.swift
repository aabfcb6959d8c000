import CSQLite
import FanoutModel
import FanoutSQLite
import FanoutSnapshot

/// A value written into a snapshot column.
public enum ColumnValue: Sendable, Equatable {
  case null
  case int(Int64)
  case text(String)

  public static func flag(_ b: Bool) -> ColumnValue { .int(b ? 1 : 0) }
  public static func level(_ l: Level?) -> ColumnValue { l.map { .text($0.name) } ?? .null }
}

/// The row of a preference level that a change addresses.
public enum LevelTarget: Sendable, Equatable {
  case user(String)
  case scope(user: String, Scope)
  case channel(user: String, channel: String)
}

/// Writes preference changes into a snapshot file, inside one transaction.
/// It writes rows as the schema defines them and creates the optional
/// tables it needs; it does not validate references or values: the caller
/// checks its entries, and the finished file is loaded with
/// `SnapshotLoader.load` before it replaces anything.
public final class SnapshotEditor {
  private let connection: Connection
  public let path: String
  private var present: Set<String> = []
  /// Rows inserted, updated or deleted, per table.
  public private(set) var changedRows: [String: Int] = [:]

  /// Opens `path` for writing and begins the write transaction, waiting up
  /// to `busyTimeoutMilliseconds` for another writer.
  public init(path: String, busyTimeoutMilliseconds: Int = 0) throws(SQLiteError) {
    self.path = path
    connection = try Connection(path: path, writable: true)
    connection.waitWhenBusy(milliseconds: busyTimeoutMilliseconds)
    try connection.execute("BEGIN IMMEDIATE")
    let list = try connection.prepare(
      "SELECT lower(name) FROM sqlite_master WHERE type IN ('table', 'view')")
    while try list.step() { present.insert(list.text(0)) }
  }

  /// Commits; in WAL mode then copies what it can into the main file, so
  /// that watchers of the file (`fanout stream`) see it change.
  public func commit() throws(SQLiteError) {
    try connection.execute("COMMIT")
    try? connection.execute("PRAGMA wal_checkpoint(PASSIVE)")
  }

  // MARK: Levels

  /// Sets columns of a users, scope_prefs or channel_prefs row; a missing
  /// scope or channel row is inserted (its other columns NULL). A user row
  /// must exist.
  public func set(_ target: LevelTarget, _ columns: [(String, ColumnValue)]) throws(SQLiteError) {
    guard !columns.isEmpty else { return }
    let (table, keys): (String, [(String, String)]) =
      switch target {
      case .user(let u): ("users", [("user_id", u)])
      case .scope(let u, let scope): ("scope_prefs", [("user_id", u), ("scope", scope.name)])
      case .channel(let u, let c): ("channel_prefs", [("user_id", u), ("channel_id", c)])
      }
    try ensureTable(table)
    let updated = try run(
      "UPDATE \(table) SET \(columns.map { "\($0.0) = ?" }.joined(separator: ", ")) WHERE "
        + keys.map { "\($0.0) = ?" }.joined(separator: " AND "),
      columns.map(\.1) + keys.map { .text($0.1) })
    if updated == 0 && table != "users" {
      let names = keys.map(\.0) + columns.map(\.0)
      try run(
        "INSERT INTO \(table) (\(names.joined(separator: ", "))) VALUES (\(names.map { _ in "?" }.joined(separator: ", ")))",
        keys.map { .text($0.1) } + columns.map(\.1))
    }
    changedRows[table, default: 0] += 1
  }

  // MARK: Do not disturb

  /// Replaces the user's weekly windows (none: the daily window applies again).
  public func replaceWeekly(user: String, _ windows: [WeeklyWindow]) throws(SQLiteError) {
    try ensureTable("dnd_weekly")
    try run("DELETE FROM dnd_weekly WHERE user_id = ?", [.text(user)], table: "dnd_weekly")
    for w in windows {
      try run(
        "INSERT INTO dnd_weekly (user_id, weekday, start_min, end_min) VALUES (?, ?, ?, ?)",
        [.text(user), .int(Int64(w.weekday)), .int(Int64(w.start)), .int(Int64(w.end))],
        table: "dnd_weekly")
    }
  }

  // MARK: Devices

  /// Registers a token on a gateway for the user. The token moves to the user
  /// if another user held it ((gateway, token) is unique); with `unique`, the
  /// user's other tokens on that gateway are removed.
  public func registerDevice(user: String, gateway: String, token: String, unique: Bool)
    throws(SQLiteError)
  {
    if unique {
      try run(
        "DELETE FROM devices WHERE user_id = ? AND gateway = ? AND token <> ?",
        [.text(user), .text(gateway), .text(token)], table: "devices")
    }
    let moved = try run(
      "UPDATE devices SET user_id = ? WHERE gateway = ? AND token = ? AND user_id <> ?",
      [.text(user), .text(gateway), .text(token), .text(user)], table: "devices")
    let exists = try count(
      "SELECT count(*) FROM devices WHERE gateway = ? AND token = ?",
      [.text(gateway), .text(token)])
    if moved == 0 && exists == 0 {
      try run(
        "INSERT INTO devices (device_id, user_id, gateway, token) "
          + "VALUES ((SELECT coalesce(max(device_id), 0) + 1 FROM devices), ?, ?, ?)",
        [.text(user), .text(gateway), .text(token)], table: "devices")
    }
  }

  /// The user a token on a gateway is registered to, if any.
  public func holder(gateway: String, token: String) throws(SQLiteError) -> String? {
    let statement = try connection.prepare(
      "SELECT user_id FROM devices WHERE gateway = ? AND token = ? LIMIT 1")
    statement.bind(1, gateway)
    statement.bind(2, token)
    return try statement.step() ? statement.text(0) : nil
  }

  /// Removes the user's devices matching `gateway` and `token` (nil: any);
  /// returns how many were removed.
  @discardableResult
  public func removeDevices(user: String, gateway: String?, token: String?) throws(SQLiteError)
    -> Int
  {
    var sql = "DELETE FROM devices WHERE user_id = ?"
    var values: [ColumnValue] = [.text(user)]
    if let gateway {
      sql += " AND gateway = ?"
      values.append(.text(gateway))
    }
    if let token {
      sql += " AND token = ?"
      values.append(.text(token))
    }
    return try run(sql, values, table: "devices")
  }

  // MARK: Categories and gateways

  /// Sets (or with nil removes) the user's row for (category, gateway); a nil
  /// gateway is the whole category.
  public func setCategoryPreference(
    user: String, category: String, gateway: String?, _ preference: Preference?
  ) throws(SQLiteError) {
    try ensureTable("category_prefs")
    let gatewayTest = gateway == nil ? "gateway IS NULL" : "gateway = ?"
    let key: [ColumnValue] = [.text(user), .text(category)] + (gateway.map { [.text($0)] } ?? [])
    try run(
      "DELETE FROM category_prefs WHERE user_id = ? AND category = ? AND \(gatewayTest)", key,
      table: "category_prefs")
    guard let preference else { return }
    try run(
      "INSERT INTO category_prefs (user_id, category, gateway, preference) VALUES (?, ?, ?, ?)",
      [
        .text(user), .text(category), gateway.map(ColumnValue.text) ?? .null,
        .text(preference == .optIn ? "opt_in" : "opt_out"),
      ],
      table: "category_prefs")
  }

  /// The gateways the user has their own row for in `category`.
  public func categoryGatewayPreferences(user: String, category: String) throws(SQLiteError)
    -> [String]
  {
    guard present.contains("category_prefs") else { return [] }
    let statement = try connection.prepare(
      "SELECT gateway FROM category_prefs WHERE user_id = ? AND category = ? AND gateway IS NOT NULL ORDER BY gateway"
    )
    statement.bind(1, user)
    statement.bind(2, category)
    var gateways: [String] = []
    while try statement.step() { gateways.append(statement.text(0)) }
    return gateways
  }

  /// gateway_prefs: restricted (only categories in which the gateway is mandatory) or not.
  public func setRestricted(user: String, gateway: String, _ restricted: Bool) throws(SQLiteError) {
    try ensureTable("gateway_prefs")
    try run(
      "DELETE FROM gateway_prefs WHERE user_id = ? AND gateway = ?", [.text(user), .text(gateway)],
      table: "gateway_prefs")
    try run(
      "INSERT INTO gateway_prefs (user_id, gateway, restricted) VALUES (?, ?, ?)",
      [.text(user), .text(gateway), .flag(restricted)], table: "gateway_prefs")
  }

  // MARK: SQL

  /// Creates an optional table the snapshot lacks, as the schema defines it.
  private func ensureTable(_ name: String) throws(SQLiteError) {
    guard !present.contains(name) else { return }
    try connection.execute(SnapshotSchema.createSQL(table: name))
    present.insert(name)
  }

  @discardableResult
  private func run(_ sql: String, _ values: [ColumnValue], table: String? = nil) throws(SQLiteError)
    -> Int
  {
    let statement = try connection.prepare(sql)
    for (i, value) in values.enumerated() {
      switch value {
      case .null: statement.bindNull(Int32(i + 1))
      case .int(let v): statement.bind(Int32(i + 1), v)
      case .text(let s): statement.bind(Int32(i + 1), s)
      }
    }
    try statement.insert()
    let n = connection.changes
    if let table, n > 0 { changedRows[table, default: 0] += n }
    return n
  }

  private func count(_ sql: String, _ values: [ColumnValue]) throws(SQLiteError) -> Int {
    let statement = try connection.prepare(sql)
    for (i, value) in values.enumerated() {
      if case .text(let s) = value { statement.bind(Int32(i + 1), s) }
    }
    _ = try statement.step()
    return Int(statement.int64(0))
  }
}
