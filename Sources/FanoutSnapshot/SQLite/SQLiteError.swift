import CSQLite

/// A failed SQLite call: its result code, SQLite's message and the SQL.
public struct SQLiteError: Error, CustomStringConvertible, Equatable {
  public let code: Int32
  public let message: String
  public let sql: String?

  public var description: String {
    var text = "SQLite error \(code): \(message)"
    if let sql { text += " (in \(sql))" }
    return text
  }

  @inline(never)
  package static func from(_ db: OpaquePointer?, code: Int32, sql: String?) -> SQLiteError {
    let message =
      db.flatMap { sqlite3_errmsg($0) }.map { String(cString: $0) }
      ?? String(cString: sqlite3_errstr(code))
    return SQLiteError(code: code, message: message, sql: sql)
  }
}
