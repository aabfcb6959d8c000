import CSQLite
import FanoutIndex
import FanoutModel
import FanoutSQLite

/// `devices`: the first table to name gateways.
struct DeviceRows: Sendable {
  var devices: [(id: Int64, user: Int32, gateway: Int32)] = []
  /// Each device's token as a JSON string literal.
  var tokens = BytePool()
  /// Gateways in order of first sight; renumbered by name when the index is built.
  var gateways = StringTable()

  /// Users are looked up in batches (`KeyBatch`); the error reported is
  /// still the one a row-by-row scan meets first. With `notificationGroups`
  /// (contract v3) the gateway name `updates` is refused: it names the
  /// update lines' file.
  static func read(_ connection: Connection, users: StringTable, notificationGroups: Bool)
    throws(SnapshotError) -> DeviceRows
  {
    let r = try connection.reader("devices", key: [0], orderBy: "device_id")
    var rows = DeviceRows()
    // (gateway, token) pairs seen, when the file's schema does not keep them unique itself.
    let checksTokens = !connection.keepsDeviceTokensUnique()
    var gatewayTokens = StringTable(capacity: checksTokens ? try connection.rowCount("devices") : 0)
    var pair: [UInt8] = []
    var lastID: Int64? = nil
    var userKeys = KeyBatch()
    var awaitingUser: [(id: Int64, gateway: Int32)] = []

    func resolveUsers() throws(SnapshotError) {
      userKeys.resolve(in: users)
      for (k, row) in awaitingUser.enumerated() {
        let u = userKeys.ids[k]
        guard u >= 0 else {
          throw SnapshotError(
            table: "devices", key: "device_id=\(row.id)", column: "user_id",
            reason: "unknown user \(Bounded.quoted(userKeys.name(k)))")
        }
        rows.devices.append((row.id, u, row.gateway))
      }
      userKeys.removeAll()
      awaitingUser.removeAll(keepingCapacity: true)
    }

    do throws(SnapshotError) {
      while try r.next() {
        let id = try r.int(0)
        if let lastID, lastID >= id { throw r.fail(0, "duplicate key") }
        lastID = id
        userKeys.append(try r.textBytes(1))
        let gatewayName = try r.textBytes(2)
        guard SnapshotSchema.isValidGatewayName(gatewayName) else {
          throw r.fail(
            2,
            "gateway \(Bounded.quoted(try r.text(2))) is not a valid name ([a-z0-9][a-z0-9._-]*, at most "
              + "\(SnapshotSchema.maxGatewayNameBytes) bytes, not decisions, summary, rejected or batches)"
          )
        }
        if notificationGroups && gatewayName.elementsEqual("updates".utf8) {
          throw r.fail(
            2,
            "gateway 'updates' is reserved when notification_groups is 'on' (it names the "
              + "update lines' file, updates.ndjson.lz4)")
        }
        let g = try r.gateway(2, in: &rows.gateways)
        let token = try r.textBytes(3)
        if checksTokens {
          pair.removeAll(keepingCapacity: true)
          pair.append(contentsOf: gatewayName)
          pair.append(0)
          pair.append(contentsOf: token)
          guard pair.withUnsafeBytes({ gatewayTokens.insert($0) }) != nil else {
            throw r.fail(
              3,
              "token is already registered on gateway \(Bounded.quoted(try r.text(2))) (gateway, token) must be unique"
            )
          }
        }
        rows.tokens.appendQuoted(token)
        awaitingUser.append((id, g))
        if userKeys.isFull { try resolveUsers() }
      }
    } catch {
      // This row's user, or an earlier one's, is the error a row-by-row scan meets first.
      if userKeys.count > awaitingUser.count { awaitingUser.append((lastID ?? 0, 0)) }
      try resolveUsers()
      throw error
    }
    try resolveUsers()
    return rows
  }
}

extension Connection {
  /// Whether SQLite itself keeps the (gateway, token) pairs of `devices`
  /// unique, as the contract's `UNIQUE (gateway, token)` does: a unique
  /// index, not partial, whose keys are `gateway`, `token` or both, plain
  /// columns under built-in collations (under which equal bytes are equal
  /// keys). SQLite refuses every write that would break such an index, so
  /// the load need not check the pairs again (a hash table of 1.65M pairs
  /// at 1M users, 4% of the load's CPU). Anything else — no such index, or
  /// a question SQLite cannot answer — and the load checks them itself.
  /// (A file whose index disagrees with its table is corrupt, which
  /// `PRAGMA integrity_check` finds; the load does not run it.)
  package func keepsDeviceTokensUnique() -> Bool {
    do throws(SQLiteError) {
      // The schema an unqualified `devices` names: the main file's, else the base's.
      for schema in schemas {
        let table = try prepare("SELECT count(*) FROM pragma_table_info('devices', ?)")
        table.bind(1, schema)
        guard try table.step(), table.int64(0) > 0 else { continue }
        let indexes = try prepare(
          "SELECT name FROM pragma_index_list('devices', ?) WHERE \"unique\" = 1 AND partial = 0")
        indexes.bind(1, schema)
        while try indexes.step() {
          let keys = try prepare("SELECT name, coll FROM pragma_index_xinfo(?, ?) WHERE key = 1")
          keys.bind(1, indexes.text(0))
          keys.bind(2, schema)
          var count = 0
          var pairKeys = true
          while try keys.step() {
            count += 1
            let column = keys.type(0) == SQLITE_TEXT ? keys.text(0).lowercased() : ""
            let collation = keys.text(1).uppercased()
            pairKeys =
              pairKeys && (column == "gateway" || column == "token")
              && ["BINARY", "NOCASE", "RTRIM"].contains(collation)
          }
          if count > 0 && pairKeys { return true }
        }
        return false
      }
      return false
    } catch {
      return false
    }
  }
}

/// `categories`: read in name order.
struct CategoryRows: Sendable {
  var categories = StringTable()
  var mandatory: [Bool] = []
  var defaults: [Preference] = []

  static func read(_ connection: Connection) throws(SnapshotError) -> CategoryRows {
    let r = try connection.reader("categories", key: [0], orderBy: "category COLLATE BINARY")
    var rows = CategoryRows()
    while try r.next() {
      guard rows.categories.insert(try r.textBytes(0)) != nil else {
        throw r.fail(nil, "duplicate key")
      }
      rows.defaults.append(try r.required(1, "opt_in or opt_out", Preference.init(name:)))
      rows.mandatory.append(try r.flag(2))
    }
    return rows
  }
}

/// The tables after `categories` that name gateways, read one after the
/// other on one connection, in schema order: each may name a gateway the
/// ones before did not (`gateways` grows as they go).
struct GatewayPrefRows: Sendable {
  var gateways: StringTable
  /// The (category, gateway) pairs that are mandatory, and the table's rows.
  var mandatory: [(category: Int32, gateway: Int32)] = []
  var categoryGatewayRows = 0
  var categoryPrefs: [(user: Int32, category: Int32, gateway: Int32, pref: Preference)] = []
  /// `restrictionKey(user, gateway)` where the user restricted the
  /// gateway, and the table's rows.
  var restricted: Set<UInt64> = []
  var gatewayPrefRows = 0

  /// Reads those of the three tables that are `present`, stopping at the
  /// first error (the earliest in schema order).
  static func read(
    _ connection: Connection, present: Set<String>, users: StringTable,
    categories: StringTable, gateways: StringTable
  ) throws(SnapshotError) -> GatewayPrefRows {
    var rows = GatewayPrefRows(gateways: gateways)
    if present.contains("category_gateways") {
      try rows.readCategoryGateways(connection, categories: categories)
    }
    if present.contains("category_prefs") {
      try rows.readCategoryPrefs(connection, users: users, categories: categories)
    }
    if present.contains("gateway_prefs") { try rows.readGatewayPrefs(connection, users: users) }
    return rows
  }

  private mutating func readCategoryGateways(_ connection: Connection, categories: StringTable)
    throws(SnapshotError)
  {
    let r = try connection.reader("category_gateways", key: [0, 1])
    var seen: Set<UInt64> = []
    while try r.next() {
      categoryGatewayRows += 1
      let c = try r.category(0, in: categories)
      let g = try r.gateway(1, in: &gateways)
      guard seen.insert(UInt64(UInt32(c)) << 32 | UInt64(UInt32(g))).inserted else {
        throw r.fail(nil, "duplicate key")
      }
      if try r.flag(2) { mandatory.append((c, g)) }
    }
  }

  private mutating func readCategoryPrefs(
    _ connection: Connection, users: StringTable, categories: StringTable
  ) throws(SnapshotError) {
    let r = try connection.reader("category_prefs", key: [0, 1, 2])
    var seen: Set<[Int32]> = []
    while try r.next() {
      let u = try r.user(0, in: users)
      let c = try r.category(1, in: categories)
      let g = r.isNull(2) ? -1 : try r.gateway(2, in: &gateways)
      let pref = try r.required(3, "opt_in or opt_out", Preference.init(name:))
      guard seen.insert([u, c, g]).inserted else {
        throw r.fail(nil, "two rows for the same (user_id, category, gateway)")
      }
      categoryPrefs.append((u, c, g, pref))
    }
  }

  private mutating func readGatewayPrefs(_ connection: Connection, users: StringTable)
    throws(SnapshotError)
  {
    let r = try connection.reader("gateway_prefs", key: [0, 1])
    var seen: Set<UInt64> = []
    while try r.next() {
      let u = try r.user(0, in: users)
      let g = try r.gateway(1, in: &gateways)
      let key = Self.restrictionKey(user: u, gateway: g)
      guard seen.insert(key).inserted else { throw r.fail(nil, "duplicate key") }
      if try r.flag(2) { restricted.insert(key) }
    }
    gatewayPrefRows = seen.count
  }

  /// A (user row, gateway row) pair as one key of `restricted`.
  static func restrictionKey(user: Int32, gateway: Int32) -> UInt64 {
    UInt64(UInt32(bitPattern: user)) << 32 | UInt64(UInt32(bitPattern: gateway))
  }
}
