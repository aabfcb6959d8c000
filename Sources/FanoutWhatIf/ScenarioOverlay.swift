import CSQLite
import FanoutModel
import FanoutSQLite
import FanoutSnapshot

/// The tables of a what-if scenario's overlay (`ScenarioCopy`): which of
/// the base's tables a statement would write, copied into the overlay
/// before it runs, and whether the scenario needs a whole copy instead.
///
/// Decided by SQLite's authorizer, called for every table a statement
/// would touch while it is prepared: a write to a table of the base is
/// denied and noted, the table copied, and the statement prepared again,
/// now naming the overlay's table (SQLite looks up a name in the main file
/// before attached ones).
final class OverlayTables {
  let connection: Connection
  /// Base tables a statement was denied for, to copy before preparing it again.
  private var pending: [String] = []
  /// Set by anything an overlay would not answer as a whole copy does.
  private(set) var needsWholeCopy = false
  /// Rows the overlay may still copy before a whole copy is the faster
  /// one: copying a table costs about 0.5 µs a row with its indexes (users,
  /// 1M rows: 0.5 s; members, 19M rows: 15 s), a whole copy of the file
  /// 0.5–6 s at 1M users (1.8 GB), depending on the disk's writeback.
  private var rowBudget = 4_000_000

  init(_ connection: Connection) { self.connection = connection }

  var hasTablesToCopy: Bool { !pending.isEmpty }

  private static let base = Connection.baseSchema

  /// Whether the base (attached to `overlay`) can be overlaid: no views or
  /// triggers (a view or trigger of the base would keep using the base's
  /// table, not the overlay's copy), no AUTOINCREMENT (its counters live in
  /// `sqlite_sequence`), and foreign keys off (no cascade writes a table
  /// the authorizer was not asked about).
  static func canOverlay(_ overlay: Connection) throws(SQLiteError) -> Bool {
    let objects = try overlay.prepare(
      "SELECT count(*) FROM \(base).sqlite_master "
        + "WHERE type IN ('view', 'trigger') OR name = 'sqlite_sequence'")
    let foreignKeys = try overlay.prepare("PRAGMA foreign_keys")
    guard try objects.step(), objects.int64(0) == 0 else { return false }
    return try foreignKeys.step() && foreignKeys.int64(0) == 0
  }

  /// The authorizer's answer for anything but ATTACH, DETACH and PRAGMA.
  func authorize(_ action: Int32, table: UnsafePointer<CChar>?, database: UnsafePointer<CChar>?)
    -> Int32
  {
    let name = table.map { String(cString: $0) } ?? ""
    let isSchema = name.lowercased().hasPrefix("sqlite_")  // the schema, statistics
    switch action {
    case SQLITE_SELECT, SQLITE_FUNCTION, SQLITE_RECURSIVE, SQLITE_TRANSACTION, SQLITE_SAVEPOINT:
      return SQLITE_OK
    case SQLITE_READ:
      if !isSchema { return SQLITE_OK }
    case SQLITE_INSERT, SQLITE_UPDATE, SQLITE_DELETE:
      if isSchema { break }
      guard database.map({ String(cString: $0) }) == Self.base else { return SQLITE_OK }
      if !pending.contains(name) { pending.append(name) }
      return SQLITE_DENY
    default:
      break
    }
    // Schema changes, reads of the schema: the overlay would answer otherwise.
    needsWholeCopy = true
    return SQLITE_DENY
  }

  /// Copies each pending table into the overlay — its schema, rows with
  /// their rowids, and indexes — so that it reads and conflicts as the
  /// base's; false (and `needsWholeCopy`) for a table it cannot copy
  /// exactly (generated columns, a column named like the rowid, no rowid)
  /// or too large to copy faster than the whole file (`rowBudget`).
  /// Why a table could not be copied, when the reason is final: A's stored
  /// schema is not what SQLite itself writes.
  private(set) var refusal: String?

  /// Copies `tables` now, as if a statement had been denied for each
  /// (`OverlayTemplate`).
  func copy(_ tables: [String]) -> Bool {
    pending = tables
    return copyPendingTables()
  }

  func copyPendingTables() -> Bool {
    defer { pending.removeAll() }
    do throws(SQLiteError) {
      for table in pending where try !copy(table) {
        needsWholeCopy = true
        return false
      }
      return true
    } catch {
      needsWholeCopy = true
      return false
    }
  }

  private func copy(_ table: String) throws(SQLiteError) -> Bool {
    let quoted = "\"" + table.replacing("\"", with: "\"\"") + "\""
    let create = try connection.prepare(
      "SELECT sql FROM \(Self.base).sqlite_master WHERE type = 'table' AND name = ?")
    create.bind(1, table)
    guard try create.step() else { return false }
    let createSQL = create.text(0)
    var columns: [String] = []
    let info = try connection.prepare("SELECT name, hidden FROM pragma_table_xinfo(?, ?)")
    info.bind(1, table)
    info.bind(2, Self.base)
    while try info.step() {
      let column = info.text(0)
      guard info.int64(1) == 0, !["rowid", "oid", "_rowid_"].contains(column.lowercased())
      else { return false }
      columns.append("\"" + column.replacing("\"", with: "\"\"") + "\"")
    }
    // Rows estimated from the rowid span (the b-tree's two ends); a
    // WITHOUT ROWID table has no cheap estimate: whole copy.
    let span: ClosedRange<Int64>?
    do { span = try connection.rowidSpan(of: "\(Self.base).\(quoted)") } catch { return false }
    if let span {
      let (width, overflow) = span.upperBound.subtractingReportingOverflow(span.lowerBound)
      guard !overflow, width < Int64(rowBudget) else { return false }
      rowBudget -= Int(width) + 1
    }
    guard rowBudget >= 0 else { return false }
    let list = (["rowid"] + columns).joined(separator: ", ")
    var indexes: [String] = []
    let indexList = try connection.prepare(
      "SELECT sql FROM \(Self.base).sqlite_master "
        + "WHERE type = 'index' AND tbl_name = ? AND sql IS NOT NULL")
    indexList.bind(1, table)
    while try indexList.step() { indexes.append(indexList.text(0)) }
    // The stored SQL is A's, which anyone who could write A may have set
    // (PRAGMA writable_schema): each must be exactly one CREATE statement of
    // its kind, run as one prepared statement, never as a script.
    let refused =
      "A's stored schema for table '\(Bounded.text(table))' is not one CREATE TABLE or CREATE "
      + "INDEX statement each (edited with PRAGMA writable_schema?); a scenario will not run it"
    guard try connection.runStoredSchema(createSQL, kinds: ["CREATE TABLE "]) else {
      refusal = refused
      return false
    }
    // `SELECT *` between two tables of one CREATE statement lets SQLite copy
    // the records as stored, rowids with them (its transfer optimization:
    // 1M users in 0.4 s against 0.8 s column by column). Should it not,
    // the rows are numbered from 1 and the copy is kept only if its rowids
    // span A's (distinct, so then they are A's); else it is made again
    // with the rowids named.
    try connection.execute("INSERT INTO main.\(quoted) SELECT * FROM \(Self.base).\(quoted)")
    if try connection.rowidSpan(of: "main.\(quoted)")
      != (try connection.rowidSpan(of: "\(Self.base).\(quoted)"))
    {
      try connection.execute("DELETE FROM main.\(quoted)")
      try connection.execute(
        "INSERT INTO main.\(quoted) (\(list)) SELECT \(list) FROM \(Self.base).\(quoted)")
    }
    for index in indexes
    where try !connection.runStoredSchema(index, kinds: ["CREATE INDEX ", "CREATE UNIQUE INDEX "]) {
      refusal = refused
      return false
    }
    return true
  }
}
