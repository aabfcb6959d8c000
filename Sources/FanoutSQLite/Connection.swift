import CSQLite
import FanoutModel

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// An open SQLite database; closed when the last reference goes.
package final class Connection {
  package let handle: OpaquePointer

  /// Whether a base snapshot is attached (`init(path:writable:base:)`).
  package let hasBase: Bool

  /// Opens an existing file read-only, or (with `writable`) read-write,
  /// creating it. With a `base`, that file is attached read-only as
  /// `Connection.baseSchema`: a table this file lacks is read from it (SQLite
  /// looks up an unqualified name in the main file first, then in attached
  /// ones), which is how a what-if scenario's overlay is read
  /// (`ScenarioCopy`).
  package init(path: String, writable: Bool = false, base: String? = nil) throws(SQLiteError) {
    _ = Self.configured
    var db: OpaquePointer?
    let flags = writable ? SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE : SQLITE_OPEN_READONLY
    // URI names only with a base, to attach it read-only (a plain path is kept plain).
    let uri = base == nil ? 0 : SQLITE_OPEN_URI
    let code = sqlite3_open_v2(path, &db, flags | SQLITE_OPEN_NOMUTEX | uri, nil)
    guard code == SQLITE_OK, let db else {
      let error = SQLiteError.from(db, code: code, sql: nil)
      sqlite3_close_v2(db)
      throw error
    }
    handle = db
    hasBase = base != nil
    if let base {
      let attach = try prepare("ATTACH ? AS \(Self.baseSchema)")
      attach.bind(1, Self.readOnlyURI(base))
      try attach.insert()
    }
  }

  /// SQLite's process-wide settings, made before its first connection
  /// (`csqlite_disable_memory_statistics`).
  private static let configured: Void = { _ = csqlite_disable_memory_statistics() }()

  /// The schema name a base snapshot is attached under: one no scenario's
  /// SQL would name by chance.
  package static let baseSchema = "fanout_scenario_base"

  /// The schemas a read of the snapshot covers: the main file, and the
  /// attached base if any.
  package var schemas: [String] { hasBase ? ["main", Self.baseSchema] : ["main"] }

  /// A `file:` URI opening `path` read-only, whatever bytes the path holds.
  static func readOnlyURI(_ path: String) -> String {
    var uri = "file:"
    for byte in path.utf8 {
      switch byte {
      case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
        UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "/"), UInt8(ascii: "."),
        UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "~"):
        uri.unicodeScalars.append(Unicode.Scalar(byte))
      default:
        uri +=
          "%" + String(byte >> 4, radix: 16, uppercase: true)
          + String(byte & 15, radix: 16, uppercase: true)
      }
    }
    return uri + "?mode=ro"
  }

  deinit { sqlite3_close_v2(handle) }

  /// Rows changed by the last INSERT, UPDATE or DELETE.
  package var changes: Int { Int(sqlite3_changes(handle)) }

  package func prepare(_ sql: String) throws(SQLiteError) -> Statement {
    try Statement(connection: self, sql: sql)
  }

  /// SQLite's own open file for the main database, and its methods: the
  /// way to read the file's bytes here, as opening and closing the file
  /// ourselves would drop every lock this process holds on it (POSIX locks
  /// are per process and file, and go with any close).
  private func mainFile() -> (UnsafeMutablePointer<sqlite3_file>, sqlite3_io_methods)? {
    var file: UnsafeMutablePointer<sqlite3_file>?
    guard sqlite3_file_control(handle, "main", SQLITE_FCNTL_FILE_POINTER, &file) == SQLITE_OK,
      let file, let methods = file.pointee.pMethods?.pointee
    else { return nil }
    return (file, methods)
  }

  /// The first 100 bytes of the main database file (SQLite's header), read
  /// through SQLite's own file handle (`mainFile`).
  package func fileHeader() -> [UInt8]? {
    guard let (file, methods) = mainFile(), let read = methods.xRead else { return nil }
    var bytes = [UInt8](repeating: 0, count: 100)
    let code = bytes.withUnsafeMutableBytes { read(file, $0.baseAddress, 100, 0) }
    return code == SQLITE_OK ? bytes : nil
  }

  /// Copies the main database file's bytes to a new file at `path`, read
  /// through SQLite's own file handle (`mainFile`); false, with nothing
  /// left at `path`, when any read or write fails. Only a copy made while
  /// this connection holds a read transaction in rollback-journal mode is
  /// one committed state.
  package func copyMainFile(to path: String) -> Bool {
    guard let (file, methods) = mainFile(), let read = methods.xRead,
      let fileSize = methods.xFileSize
    else { return false }
    var size: sqlite3_int64 = 0
    guard fileSize(file, &size) == SQLITE_OK else { return false }
    let output = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
    guard output >= 0 else { return false }
    var chunk = [UInt8](repeating: 0, count: 8 << 20)
    var copied: sqlite3_int64 = 0
    let complete = chunk.withUnsafeMutableBytes { buffer in
      while copied < size {
        let count = Int(min(sqlite3_int64(buffer.count), size - copied))
        guard read(file, buffer.baseAddress, Int32(count), copied) == SQLITE_OK else {
          return false
        }
        do throws(SystemCallError) {
          try writeAll(output, UnsafeRawBufferPointer(rebasing: buffer[0..<count]))
        } catch { return false }
        copied += sqlite3_int64(count)
      }
      return true
    }
    close(output)
    if !complete { unlink(path) }
    return complete
  }

  /// Runs one or more statements that return no rows.
  /// Runs `sql`, schema SQL stored in a database, if it is exactly one
  /// statement starting with one of `kinds` (upper case, one space apart,
  /// as SQLite stores them); false, running nothing, otherwise.
  package func runStoredSchema(_ sql: String, kinds: [String]) throws(SQLiteError) -> Bool {
    let head = sql.drop { $0 == " " || $0 == "\n" || $0 == "\t" || $0 == "\r" }.prefix(24)
      .uppercased()
    guard kinds.contains(where: { head.hasPrefix($0) }) else { return false }
    var statement: OpaquePointer?
    var rest = true
    let code = sql.withCString { text in
      var tail: UnsafePointer<CChar>?
      let code = sqlite3_prepare_v2(handle, text, -1, &statement, &tail)
      // Nothing may follow but spaces (SQLite keeps no semicolon or comment there).
      if let tail { rest = String(cString: tail).contains { !$0.isWhitespace } }
      return code
    }
    defer { sqlite3_finalize(statement) }
    guard code == SQLITE_OK else { throw SQLiteError.from(handle, code: code, sql: sql) }
    guard statement != nil, !rest else { return false }
    let step = sqlite3_step(statement)
    guard step == SQLITE_DONE else { throw SQLiteError.from(handle, code: step, sql: sql) }
    return true
  }

  /// The least and greatest rowid of `table` (a name as SQL writes it,
  /// quoted or qualified as needed), each read at its end of the b-tree
  /// by a query of its own (asked for together, `min(rowid), max(rowid)`
  /// scans the table); nil when the table is empty. Throws for a table
  /// without rowids.
  package func rowidSpan(of table: String) throws(SQLiteError) -> ClosedRange<Int64>? {
    let span = try prepare(
      "SELECT (SELECT min(rowid) FROM \(table)), (SELECT max(rowid) FROM \(table))")
    guard try span.step(), span.type(0) == SQLITE_INTEGER else { return nil }
    return span.int64(0)...span.int64(1)
  }

  package func execute(_ sql: String) throws(SQLiteError) {
    let code = sqlite3_exec(handle, sql, nil, nil, nil)
    guard code == SQLITE_OK else { throw SQLiteError.from(handle, code: code, sql: sql) }
  }
}

@available(*, unavailable)
extension Connection: Sendable {}

/// One column of the current row (`Statement.value`).
package struct SQLiteValue {
  @usableFromInline let handle: OpaquePointer?

  @usableFromInline init(handle: OpaquePointer?) { self.handle = handle }

  @inlinable @inline(__always) package var type: Int32 { sqlite3_value_type(handle) }
  @inlinable @inline(__always) package var int64: Int64 { sqlite3_value_int64(handle) }

  /// The text as bytes (converted to UTF-8 if the database holds UTF-16).
  @inlinable @inline(__always) package var textBytes: UnsafeRawBufferPointer {
    guard let p = sqlite3_value_text(handle) else {
      return UnsafeRawBufferPointer(start: nil, count: 0)
    }
    return UnsafeRawBufferPointer(start: p, count: Int(sqlite3_value_bytes(handle)))
  }
}

/// A prepared statement, finalized when the last reference goes.
package final class Statement {
  let connection: Connection
  package let handle: OpaquePointer
  let sql: String

  fileprivate init(connection: Connection, sql: String) throws(SQLiteError) {
    var stmt: OpaquePointer?
    let code = sqlite3_prepare_v2(connection.handle, sql, -1, &stmt, nil)
    guard code == SQLITE_OK, let stmt else {
      throw SQLiteError.from(connection.handle, code: code, sql: sql)
    }
    self.connection = connection
    self.handle = stmt
    self.sql = sql
  }

  deinit { sqlite3_finalize(handle) }

  /// Advances to the next row; false when done.
  package func step() throws(SQLiteError) -> Bool {
    switch sqlite3_step(handle) {
    case SQLITE_ROW: return true
    case SQLITE_DONE: return false
    case let code: throw SQLiteError.from(connection.handle, code: code, sql: sql)
    }
  }

  /// Rewinds the statement to run again; bindings are kept.
  package func reset() { sqlite3_reset(handle) }

  // (Inlinable: the loader reads millions of rows through these, from
  // another module.)
  @inlinable @inline(__always) package func type(_ column: Int32) -> Int32 {
    sqlite3_column_type(handle, column)
  }
  @inlinable @inline(__always) package func int64(_ column: Int32) -> Int64 {
    sqlite3_column_int64(handle, column)
  }
  @inlinable @inline(__always) package func double(_ column: Int32) -> Double {
    sqlite3_column_double(handle, column)
  }

  /// The column's text as bytes, valid until the next step.
  @inlinable @inline(__always) package func textBytes(_ column: Int32) -> UnsafeRawBufferPointer {
    guard let p = sqlite3_column_text(handle, column) else {
      return UnsafeRawBufferPointer(start: nil, count: 0)
    }
    return UnsafeRawBufferPointer(start: p, count: Int(sqlite3_column_bytes(handle, column)))
  }

  package func text(_ column: Int32) -> String {
    String(decoding: textBytes(column), as: UTF8.self)
  }

  /// The column's value, valid until the next step: its type and contents
  /// read with one lookup of the column, where each `sqlite3_column_*` call
  /// looks it up and checks for errors again. (SQLite tells protected values
  /// from unprotected ones by a mutex; these connections have none —
  /// `SQLITE_OPEN_NOMUTEX` — so `sqlite3_value_*` may read them.)
  @inlinable @inline(__always) package func value(_ column: Int32) -> SQLiteValue {
    SQLiteValue(handle: sqlite3_column_value(handle, column))
  }

  // MARK: Writing

  /// Binds text to parameter `i` (1-based); SQLite copies it.
  package func bind(_ i: Int32, _ text: String) {
    var text = text
    _ = text.withUTF8 {
      sqlite3_bind_text(handle, i, $0.baseAddress, Int32($0.count), csqlite_transient())
    }
  }

  package func bind(_ i: Int32, _ value: Int64) { sqlite3_bind_int64(handle, i, value) }

  package func bindNull(_ i: Int32) { sqlite3_bind_null(handle, i) }

  /// Runs the bound statement to completion and resets it for the next row.
  package func insert() throws(SQLiteError) {
    let code = sqlite3_step(handle)
    sqlite3_reset(handle)
    guard code == SQLITE_DONE else {
      throw SQLiteError.from(connection.handle, code: code, sql: sql)
    }
  }
}

@available(*, unavailable)
extension Statement: Sendable {}
