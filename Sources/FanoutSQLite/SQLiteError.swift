/// FanoutSQLite owns the C wrapper over SQLite: a connection and its
/// prepared statements (`Connection`, `Statement`), reads at one point in
/// time over several connections (`ConsistentReads`), whole-file copies
/// (`copySnapshot`), and what a failed call means (`SQLiteError`,
/// `ResultCode`). It knows nothing of snapshots; FanoutSnapshot, what-if,
/// migration and scale-out build on it.
import CSQLite
import FanoutModel

/// A failed SQLite call: its result code, SQLite's message and the SQL.
public struct SQLiteError: Error, CustomStringConvertible, Equatable {
  public let code: Int32
  public let message: String
  public let sql: String?

  package init(code: Int32, message: String, sql: String?) {
    self.code = code
    self.message = message
    self.sql = sql
  }

  /// The statement is echoed as every value from elsewhere is
  /// (`Bounded.quoted`): a script — the whole schema, a scenario's SQL —
  /// is the statement that failed, and may be long.
  public var description: String {
    var text = "SQLite error \(code): \(message)"
    if let sql { text += " (in \(Bounded.quoted(sql)))" }
    return text
  }

  /// The result code, extended (`SQLITE_BUSY_SNAPSHOT`) or not.
  public var resultCode: ResultCode { ResultCode(rawValue: code) }

  @inline(never)
  package static func from(_ db: OpaquePointer?, code: Int32, sql: String?) -> SQLiteError {
    let message =
      db.flatMap { sqlite3_errmsg($0) }.map { String(cString: $0) }
      ?? String(cString: sqlite3_errstr(code))
    return SQLiteError(code: code, message: message, sql: sql)
  }

  /// The database is locked by a writer: worth waiting for, not a fault of the file.
  package var isBusy: Bool { resultCode.primary == .busy || resultCode.primary == .locked }

  /// The file could not be written (a full disk, an I/O error, no memory):
  /// a fault of where the data goes, not of the statement or its values.
  package var isStorageFailure: Bool {
    [.full, .ioError, .cantOpen, .readOnly, .noMemory].contains(resultCode.primary)
  }
}

/// An SQLite result code (as GRDB's `ResultCode`): extended codes carry
/// their primary code in the low byte, which `primary` gives.
public struct ResultCode: RawRepresentable, Equatable, Hashable, Sendable {
  public let rawValue: Int32
  public init(rawValue: Int32) { self.rawValue = rawValue }

  /// The primary result code (`SQLITE_BUSY` for `SQLITE_BUSY_SNAPSHOT`).
  public var primary: ResultCode { ResultCode(rawValue: rawValue & 0xFF) }

  public static let busy = ResultCode(rawValue: SQLITE_BUSY)
  /// `ConsistentReads` waited as long as it was told to.
  public static let busyTimeout = ResultCode(rawValue: SQLITE_BUSY | (3 << 8))
  public static let locked = ResultCode(rawValue: SQLITE_LOCKED)
  public static let readOnly = ResultCode(rawValue: SQLITE_READONLY)
  public static let cantOpen = ResultCode(rawValue: SQLITE_CANTOPEN)
  public static let notADatabase = ResultCode(rawValue: SQLITE_NOTADB)
  public static let full = ResultCode(rawValue: SQLITE_FULL)
  public static let ioError = ResultCode(rawValue: SQLITE_IOERR)
  public static let noMemory = ResultCode(rawValue: SQLITE_NOMEM)
}
