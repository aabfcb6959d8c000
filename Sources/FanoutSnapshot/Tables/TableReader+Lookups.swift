import FanoutIndex
import FanoutModel
import FanoutSQLite

/// The lookups table readers share: each names what it could not find.
extension TableReader {
  /// The user row of the id in column `c`.
  func user(_ c: Int32, in users: StringTable) throws(SnapshotError) -> Int32 {
    guard let row = users.find(try textBytes(c)) else {
      throw fail(c, "unknown user \(Bounded.quoted(try text(c)))")
    }
    return row
  }

  /// The channel row of the id in column `c`.
  func channel(_ c: Int32, in channels: StringTable) throws(SnapshotError) -> Int32 {
    guard let row = channels.find(try textBytes(c)) else {
      throw fail(c, "unknown channel \(Bounded.quoted(try text(c)))")
    }
    return row
  }

  /// The category row of the name in column `c`.
  func category(_ c: Int32, in categories: StringTable) throws(SnapshotError) -> Int32 {
    guard let row = categories.find(try textBytes(c)) else {
      throw fail(c, "unknown category \(Bounded.quoted(try text(c)))")
    }
    return row
  }

  /// The gateway row of the name in column `c`, numbering a new name
  /// (gateways are renumbered by name when the index is built).
  func gateway(_ c: Int32, in gateways: inout StringTable) throws(SnapshotError) -> Int32 {
    let bytes = try textBytes(c)
    return gateways.find(bytes) ?? gateways.insert(bytes)!
  }

  /// An enumerated NOT NULL column.
  func required<T>(_ c: Int32, _ allowed: String, _ parse: (String) -> T?) throws(SnapshotError)
    -> T
  {
    guard let v = try enumerated(c, allowed, parse) else { throw nullError(c) }
    return v
  }
}

extension Connection {
  /// The number of rows in `table`, to size arrays and hash tables up front.
  func rowCount(_ table: String) throws(SnapshotError) -> Int {
    do {
      let statement = try prepare("SELECT count(*) FROM \"\(table)\"")
      _ = try statement.step()
      return Int(statement.int64(0))
    } catch {
      throw SnapshotError(table: table, reason: error.message, sqlite: error)
    }
  }

  /// A reader of `table`'s columns, rows identified by the `key` columns.
  func reader(_ table: String, key: [Int32], orderBy: String? = nil) throws(SnapshotError)
    -> TableReader
  {
    try TableReader(self, SnapshotSchema.table(table), keyColumns: key, orderBy: orderBy)
  }

  /// Reads a table whose rows must come in byte order of their text id
  /// (users, channels: ids are numbered in that order). First in rowid
  /// order: tables are usually written in id order, and that spares SQLite a
  /// walk of the id index with a table lookup per row. If the ids are not in
  /// order there, or anything else is wrong, that pass is forgotten and the
  /// table is read again in index order, where every check applies as always.
  func readInIDOrder<T>(
    _ id: String, _ read: (_ orderBy: String?) throws(SnapshotError) -> T
  ) throws(SnapshotError) -> T {
    do throws(SnapshotError) {
      return try read(nil)
    } catch {
      return try read("\(id) COLLATE BINARY")
    }
  }
}
