import CSQLite
import FanoutModel
import FanoutSQLite

/// Reads one table's rows column by column, checking each value's storage
/// class and nullness (SQLite enforces neither), and builds errors that name
/// the table, the row's key and the column.
package struct TableReader {
  let table: SnapshotSchema.Table
  private let statement: Statement
  /// Positions (in `table.allColumns`) of the columns that identify a row.
  private let keyColumns: [Int32]

  /// Positions in `table.optionalColumns` of those the table has.
  private let presentOptional: Set<Int>

  /// Whether column `c` exists in the table (optional columns may not).
  func hasColumn(_ c: Int32) -> Bool {
    Int(c) < table.columns.count || presentOptional.contains(Int(c) - table.columns.count)
  }

  /// Reads `table`'s columns, optionally filtered by `condition` (with `?`
  /// placeholders bound to `arguments` in order) and ordered by `orderBy`;
  /// with `only`, the other columns read as NULL (SQLite then decodes only
  /// these).
  package init(
    _ connection: Connection, _ table: SnapshotSchema.Table, keyColumns: [Int32],
    where condition: String? = nil, arguments: [String] = [], orderBy: String? = nil,
    only: Set<Int32>? = nil
  )
    throws(SnapshotError)
  {
    self.table = table
    self.keyColumns = keyColumns
    // Optional columns the table lacks read as NULL in every row.
    var present: Set<String> = []
    if !table.optionalColumns.isEmpty {
      do {
        let pragma = try connection.prepare(
          "SELECT lower(name) FROM pragma_table_info('\(table.name)')")
        while try pragma.step() { present.insert(pragma.text(0)) }
      } catch {
        throw SnapshotError(table: table.name, reason: error.message, sqlite: error)
      }
    }
    presentOptional = Set(
      table.optionalColumns.indices.filter { present.contains(table.optionalColumns[$0]) })
    let list =
      (table.columns.map { "\"\($0)\"" }
      + table.optionalColumns.map { present.contains($0) ? "\"\($0)\"" : "NULL" })
      .enumerated().map { c, column in only?.contains(Int32(c)) ?? true ? column : "NULL" }
      .joined(separator: ", ")
    var sql = "SELECT \(list) FROM \"\(table.name)\""
    if let condition { sql += " WHERE \(condition)" }
    if let orderBy { sql += " ORDER BY \(orderBy)" }
    do {
      statement = try connection.prepare(sql)
    } catch {
      throw SnapshotError(table: table.name, reason: error.message, sqlite: error)
    }
    for (i, argument) in arguments.enumerated() { statement.bind(Int32(i + 1), argument) }
  }

  /// Moves to the next row; false at the end.
  package func next() throws(SnapshotError) -> Bool {
    do {
      return try statement.step()
    } catch {
      throw SnapshotError(table: table.name, reason: error.message, sqlite: error)
    }
  }

  // MARK: Typed access

  package func isNull(_ c: Int32) -> Bool { statement.type(c) == SQLITE_NULL }

  /// Whether column `c` holds the text 'default' (channel_prefs.chat_level).
  func isDefault(_ c: Int32) -> Bool {
    let value = statement.value(c)
    return value.type == SQLITE_TEXT && value.textBytes.elementsEqual("default".utf8)
  }

  /// A NOT NULL text column's bytes, valid until the next row. Text must
  /// be UTF-8: it is copied into JSON output and ordered by its bytes.
  func textBytes(_ c: Int32) throws(SnapshotError) -> UnsafeRawBufferPointer {
    let value = statement.value(c)
    guard value.type == SQLITE_TEXT else { throw typeError(c, expected: "TEXT") }
    let bytes = value.textBytes
    guard UTF8Check.isValid(bytes) else { throw invalidUTF8(c) }
    return bytes
  }

  /// Column `c`'s bytes when it holds text, not checked to be UTF-8 (nil
  /// for anything else): for a lookup among names already read with
  /// `text`, where only a match is taken.
  func uncheckedTextBytes(_ c: Int32) -> UnsafeRawBufferPointer? {
    let value = statement.value(c)
    return value.type == SQLITE_TEXT ? value.textBytes : nil
  }

  /// Column `c`'s text, or nil when it holds anything else: for values no
  /// rule reads, which are never refused.
  func textIfAny(_ c: Int32) -> String? {
    let value = statement.value(c)
    guard value.type == SQLITE_TEXT else { return nil }
    let bytes = value.textBytes
    return UTF8Check.isValid(bytes) ? String(decoding: bytes, as: UTF8.self) : nil
  }

  package func text(_ c: Int32) throws(SnapshotError) -> String {
    String(decoding: try textBytes(c), as: UTF8.self)
  }

  package func optionalText(_ c: Int32) throws(SnapshotError) -> String? {
    isNull(c) ? nil : try text(c)
  }

  package func int(_ c: Int32) throws(SnapshotError) -> Int64 {
    guard let v = try optionalInt(c) else { throw nullError(c) }
    return v
  }

  package func optionalInt(_ c: Int32) throws(SnapshotError) -> Int64? {
    let value = statement.value(c)
    switch value.type {
    case SQLITE_INTEGER: return value.int64
    case SQLITE_NULL: return nil
    default: throw typeError(c, expected: "INTEGER")
    }
  }

  /// A 0/1 column.
  package func flag(_ c: Int32) throws(SnapshotError) -> Bool {
    let v = try int(c)
    guard v == 0 || v == 1 else { throw fail(c, "\(v) is not 0 or 1") }
    return v == 1
  }

  package func optionalFlag(_ c: Int32) throws(SnapshotError) -> Bool? {
    isNull(c) ? nil : try flag(c)
  }

  /// A minute of the local day, 0...1439.
  package func optionalMinute(_ c: Int32) throws(SnapshotError) -> Int? {
    guard let v = try optionalInt(c) else { return nil }
    guard (0...1439).contains(v) else { throw fail(c, "minute \(v) is outside 0..1439") }
    return Int(v)
  }

  package func minute(_ c: Int32) throws(SnapshotError) -> Int {
    guard let v = try optionalMinute(c) else { throw nullError(c) }
    return v
  }

  /// An enumerated text column: one of `allowed`, exactly.
  package func enumerated<T>(_ c: Int32, _ allowed: String, _ parse: (String) -> T?)
    throws(SnapshotError)
    -> T?
  {
    guard let s = try optionalText(c) else { return nil }
    guard let value = parse(s) else {
      throw fail(c, "unknown value \(Bounded.quoted(s)) (expected \(allowed))")
    }
    return value
  }

  // MARK: Errors

  /// Column `c` holds a value of another type than `expected`.
  @inline(never)
  private func typeError(_ c: Int32, expected: String) -> SnapshotError {
    let actual = statement.type(c)
    if actual == SQLITE_NULL { return nullError(c) }
    return fail(c, "expected \(expected), found \(Self.typeName(actual)) \(render(c))")
  }

  @inline(never)
  func nullError(_ c: Int32) -> SnapshotError { fail(c, "NULL in a NOT NULL or key column") }

  @inline(never)
  func invalidUTF8(_ c: Int32) -> SnapshotError {
    fail(c, "text is not valid UTF-8 (bytes \(hex(statement.textBytes(c))))")
  }

  private func hex(_ bytes: UnsafeRawBufferPointer) -> String {
    let digits = Array("0123456789ABCDEF".utf8)
    var out: [UInt8] = []
    for b in bytes.prefix(32) {
      out += [digits[Int(b >> 4)], digits[Int(b & 15)]]
    }
    return String(decoding: out, as: UTF8.self) + (bytes.count > 32 ? "…" : "")
  }

  /// An error about column `c` of the current row.
  @inline(never)
  func fail(_ c: Int32?, _ reason: String) -> SnapshotError {
    SnapshotError(
      table: table.name, key: rowKey, column: c.map { table.allColumns[Int($0)] }, reason: reason)
  }

  /// `name='value', …` for the key columns of the current row.
  var rowKey: String {
    keyColumns.map { "\(table.allColumns[Int($0)])=\(render($0))" }.joined(separator: ", ")
  }

  private func render(_ c: Int32) -> String {
    switch statement.type(c) {
    case SQLITE_NULL: "NULL"
    case SQLITE_INTEGER: String(statement.int64(c))
    case SQLITE_FLOAT: String(statement.double(c))
    case SQLITE_TEXT: "\(Bounded.quoted(statement.text(c)))"
    default: "<blob>"
    }
  }

  private static func typeName(_ t: Int32) -> String {
    switch t {
    case SQLITE_INTEGER: "INTEGER"
    case SQLITE_FLOAT: "REAL"
    case SQLITE_TEXT: "TEXT"
    case SQLITE_BLOB: "BLOB"
    default: "NULL"
    }
  }
}
