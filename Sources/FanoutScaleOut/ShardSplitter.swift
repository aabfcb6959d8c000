import CSQLite
import FanoutModel
import FanoutSQLite
import FanoutSnapshot

#if canImport(Glibc)
  import Glibc
#endif

/// Writes a snapshot's recipient shards (docs/scale-out.md) in one pass
/// over the source, row by row: memory holds one row, plus the shards that
/// need a copy of a muted user's `users` row.
///
/// A shard gets the rows that hang off its users (the tables keyed by
/// `user_id`), every row of the app-wide tables (settings, channels,
/// categories, category_gateways), `channels.member_count` filled in where
/// NULL (the channel's rows in the whole source), the `users` rows of users
/// its `user_mutes` rows mute, and the settings key `fanout_shard` = "K/N".
///
/// Values are copied as they are stored (no conversion), into columns of
/// the same type affinity, without uniqueness constraints: a shard is
/// refused exactly where the source would be, for the rows it holds.
/// Tables and columns the contract does not name are left out.
package enum ShardSplitter {
  package enum SplitFailure: Error {
    /// The source cannot be read, or is not a snapshot.
    case source(SnapshotError)
    /// A shard file could not be written (a full disk, an I/O error).
    case write(SQLiteError)
  }

  /// Reads `source` at one point in time and writes shard k to `paths[k]`
  /// (new files); each is complete (committed, synced) when this returns.
  /// `progress` is told the rows copied and the fraction of all rows, now and then.
  package static func split(
    source: String, into paths: [String], busyTimeoutMilliseconds: Int,
    progress: ((_ rows: Int, _ fraction: Double) -> Void)? = nil
  ) throws(SplitFailure) {
    let reads: ConsistentReads
    do { try SnapshotError.checkFile(source) } catch { throw .source(error) }
    do {
      reads = try ConsistentReads(
        path: source, connections: 1, busyTimeoutMilliseconds: busyTimeoutMilliseconds)
    } catch {
      throw .source(SnapshotError.reading(source, error, waited: busyTimeoutMilliseconds))
    }
    let db = reads.main
    let count = paths.count
    let split = splitID(source, header: db.fileHeader(), shards: count)
    do throws(SQLiteError) {
      let tables = try sourceTables(db)
      let shards = try paths.map { path throws(SQLiteError) in
        let shard = try Connection(path: path, writable: true)
        // Synced by hand once complete; a crash before leaves only a partial file.
        try shard.execute("PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF; BEGIN")
        return shard
      }
      // user_mutes first: it says which users rows other shards need.
      let members = tables.first {
        $0.name == "members" && $0.columns.contains { $0.name.lowercased() == "channel_id" }
      }
      var mutedElsewhere: [String: Set<Int>] = [:]
      var copied = 0
      var total = 0
      if progress != nil {
        for table in tables {
          let count = try db.prepare("SELECT count(*) FROM \(quoted(table.sourceName))")
          if try count.step() { total += Int(count.int64(0)) }
        }
      }
      for table in tables.sorted(by: { $0.name == "user_mutes" && $1.name != "user_mutes" }) {
        try copy(
          table, select: table.selectSQL(members: members?.sourceName), from: db, to: shards,
          mutedElsewhere: &mutedElsewhere
        ) { rows in
          copied += rows
          progress?(copied, Double(copied) / Double(max(total, 1)))
        }
      }
      if !tables.contains(where: { $0.name == "settings" }) {
        for shard in shards { try shard.execute("CREATE TABLE settings (key TEXT, value TEXT)") }
      }
      for (k, shard) in shards.enumerated() {
        let label = try shard.prepare("INSERT INTO settings VALUES (?, ?)")
        label.bind(1, ShardLabel.settingsKey)
        label.bind(2, ShardLabel(index: k, count: count, split: split).settingsValue)
        try label.insert()
        for table in tables { try shard.execute(table.indexSQL) }
        try shard.execute("COMMIT")
      }
    } catch {
      // Space, I/O and opening failures are the shard files' (the source is
      // opened read-only and was read before): not a fault of the snapshot.
      if [.full, .ioError, .cantOpen].contains(error.resultCode.primary) {
        throw .write(error)
      }
      throw .source(
        SnapshotError(reason: "cannot split '\(source)': \(error.message)", sqlite: error))
    }
  }

  /// The split's id: a digest of the source's state as this read sees it
  /// (the file's and its WAL's identity, size and times, SQLite's header
  /// read inside the read transaction) and the number of shards. Two splits
  /// of one state into N agree (their shards are the same); any commit
  /// between them, or another N, gives another id.
  static func splitID(_ source: String, header: [UInt8]?, shards: Int) -> String {
    var words: [Int64] = [Int64(shards)]
    for path in [source, source + "-wal"] {
      var st = stat()
      guard stat(path, &st) == 0 else { continue }
      words += [
        Int64(st.st_dev), Int64(st.st_ino), Int64(st.st_size), Int64(st.st_mtim.tv_sec),
        Int64(st.st_mtim.tv_nsec), Int64(st.st_ctim.tv_sec), Int64(st.st_ctim.tv_nsec),
      ]
    }
    var bytes = words.withUnsafeBytes { Array($0) } + (header ?? [])
    let digest = bytes.withUnsafeMutableBytes { XXH64.hash(UnsafeRawBufferPointer($0), seed: 0) }
    return ShardLabel.hex(digest)
  }

  /// A table of the source that the contract names, with the columns it names.
  struct SourceTable {
    let name: String
    /// As the source spells it, for the SELECT.
    let sourceName: String
    let columns: [(name: String, affinity: String)]
    /// Position of `user_id` when the table's rows belong to a user.
    let userColumn: Int?
    /// channels: the source has no member_count column (it is added).
    var addsMemberCount = false

    var createSQL: String {
      var defs = columns.map { "\(quoted($0.name)) \($0.affinity)" }
      if addsMemberCount { defs.append("member_count INTEGER") }
      return "CREATE TABLE \(quoted(name)) (\(defs.joined(separator: ", ")))"
    }

    /// - Parameter members: the source's members table, when it has the
    ///   columns to count by (else the shard's validation names what is missing).
    func selectSQL(members: String?) -> String {
      var list = columns.map { "t." + quoted($0.name) }
      var from = "\(quoted(sourceName)) t"
      if name == "channels", let members,
        columns.contains(where: { $0.name.lowercased() == "channel_id" })
      {
        // NULL member_count means "count the rows"; a shard holds only some.
        from +=
          " LEFT JOIN (SELECT channel_id AS id, count(*) AS n FROM \(quoted(members)) GROUP BY channel_id) k"
          + " ON k.id = t.channel_id"
        let rows = "coalesce(k.n, 0)"
        if addsMemberCount {
          list.append(rows)
        } else if let c = columns.firstIndex(where: { $0.name.lowercased() == "member_count" }) {
          list[c] = "coalesce(t.\(quoted(columns[c].name)), \(rows))"
        }
      } else if addsMemberCount {
        list.append("NULL")
      }
      var sql = "SELECT \(list.joined(separator: ", ")) FROM \(from)"
      if name == "settings", columns.contains(where: { $0.name.lowercased() == "key" }) {
        sql += " WHERE t.key IS NOT '\(ShardLabel.settingsKey)'"
      }
      return sql
    }

    var insertSQL: String {
      let n = columns.count + (addsMemberCount ? 1 : 0)
      return
        "INSERT INTO \(quoted(name)) VALUES (\(Array(repeating: "?", count: n).joined(separator: ", ")))"
    }

    /// An index on the contract's key, which the loader reads in order.
    var indexSQL: String {
      let present = Set(columns.map { $0.name.lowercased() })
      let key = (ShardSplitter.keys[name] ?? []).filter(present.contains)
      guard !key.isEmpty else { return "" }
      return
        "CREATE INDEX \(quoted(name + "_key")) ON \(quoted(name)) (\(key.map(quoted).joined(separator: ", ")))"
    }
  }

  /// The contract's primary keys (`SnapshotSchema.createSQL`).
  static let keys: [String: [String]] = [
    "settings": ["key"], "users": ["user_id"], "channels": ["channel_id"],
    "members": ["channel_id", "user_id"], "scope_prefs": ["user_id", "scope"],
    "channel_prefs": ["user_id", "channel_id"], "devices": ["device_id"],
    "categories": ["category"], "category_gateways": ["category", "gateway"],
    "gateway_prefs": ["user_id", "gateway"], "user_mutes": ["user_id", "muted_user_id"],
    "thread_prefs": ["user_id", "channel_id", "thread_id"], "dnd_weekly": ["user_id"],
    "category_prefs": ["user_id"], "presence": ["user_id"],
  ]

  /// The tables every shard holds whole.
  static let appWide: Set<String> = ["settings", "channels", "categories", "category_gateways"]

  static func sourceTables(_ db: Connection) throws(SQLiteError) -> [SourceTable] {
    var names: [String: String] = [:]
    let list = try db.prepare("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")
    while try list.step() { names[list.text(0).lowercased()] = list.text(0) }
    var tables: [SourceTable] = []
    for table in SnapshotSchema.tables {
      guard let sourceName = names[table.name] else { continue }
      let info = try db.prepare("SELECT name, type FROM pragma_table_info(?)")
      info.bind(1, sourceName)
      var columns: [(name: String, affinity: String)] = []
      while try info.step() {
        guard table.allColumns.contains(info.text(0).lowercased()) else { continue }
        columns.append((info.text(0), affinity(ofDeclared: info.text(1))))
      }
      let user =
        appWide.contains(table.name)
        ? nil : columns.firstIndex { $0.name.lowercased() == "user_id" }
      var source = SourceTable(
        name: table.name, sourceName: sourceName, columns: columns, userColumn: user)
      source.addsMemberCount =
        table.name == "channels" && !columns.contains { $0.name.lowercased() == "member_count" }
      tables.append(source)
    }
    return tables
  }

  /// SQLite's affinity rules (datatype3.html, 3.1), so that a value stored
  /// in the shard keeps the storage class it has in the source.
  static func affinity(ofDeclared declared: String) -> String {
    let type = declared.uppercased()
    if type.contains("INT") { return "INTEGER" }
    if type.contains("CHAR") || type.contains("CLOB") || type.contains("TEXT") { return "TEXT" }
    if type.isEmpty || type.contains("BLOB") { return "BLOB" }
    if type.contains("REAL") || type.contains("FLOA") || type.contains("DOUB") { return "REAL" }
    return "NUMERIC"
  }

  /// Copies `table`'s rows to their shards; `copied` is told the rows read,
  /// every 65,536 and at the end.
  static func copy(
    _ table: SourceTable, select: String, from db: Connection, to shards: [Connection],
    mutedElsewhere: inout [String: Set<Int>], copied: (Int) -> Void
  ) throws(SQLiteError) {
    for shard in shards { try shard.execute(table.createSQL) }
    let inserts = try shards.map { shard throws(SQLiteError) in try shard.prepare(table.insertSQL) }
    let rows = try db.prepare(select)
    let width = Int32(table.columns.count + (table.addsMemberCount ? 1 : 0))
    let muted =
      table.name == "user_mutes"
      ? table.columns.firstIndex { $0.name.lowercased() == "muted_user_id" } : nil
    func write(_ k: Int) throws(SQLiteError) {
      let insert = inserts[k]
      for c in 0..<width {
        sqlite3_bind_value(insert.handle, c + 1, sqlite3_column_value(rows.handle, c))
      }
      try insert.insert()
    }
    var read = 0
    defer { copied(read & 0xFFFF) }
    while try rows.step() {
      read += 1
      if read & 0xFFFF == 0 { copied(0x10000) }
      guard let user = table.userColumn else {
        for k in shards.indices { try write(k) }
        continue
      }
      let k = shardOf(rows, Int32(user), count: shards.count)
      try write(k)
      if table.name == "users", rows.type(Int32(user)) == SQLITE_TEXT,
        let others = mutedElsewhere[rows.text(Int32(user))]
      {
        for other in others.sorted() where other != k { try write(other) }
      }
      if let muted, rows.type(Int32(muted)) == SQLITE_TEXT {
        let m = shardOf(rows, Int32(muted), count: shards.count)
        if m != k { mutedElsewhere[rows.text(Int32(muted)), default: []].insert(k) }
      }
    }
  }

  /// The shard of the row's user; a user_id that is not text (which the
  /// shard's validation refuses) goes to shard 0.
  static func shardOf(_ rows: Statement, _ column: Int32, count: Int) -> Int {
    guard rows.type(column) == SQLITE_TEXT else { return 0 }
    return Shards.shard(of: rows.textBytes(column), count: count)
  }
}

/// `name` as an SQL identifier.
private func quoted(_ name: String) -> String {
  "\"" + name.split(separator: "\"", omittingEmptySubsequences: false).joined(separator: "\"\"")
    + "\""
}
