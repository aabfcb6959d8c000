import CSQLite
import FanoutSnapshot
import Foundation

/// Builds real SQLite snapshot files from SQL text.
public enum SQLiteFixture {
  /// The contract's v1 schema, as the snapshot module defines it (fixtures
  /// that insert by position were written for it).
  public static let schema: String = SnapshotSchema.v1SQL
  /// With contract v2's optional columns and tables.
  public static let v2Schema: String = SnapshotSchema.createSQL

  /// A minimal valid population: settings plus nothing else.
  public static let header = "INSERT INTO settings VALUES ('schema_version', '1');\n"

  /// Runs `sql` in a new database file and returns its path.
  public static func make(_ sql: String, schema: String = SQLiteFixture.schema) -> String {
    let path = makeTemporaryDirectory("fanout-snapshot") + "/snapshot.sqlite"
    var db: OpaquePointer?
    precondition(sqlite3_open(path, &db) == SQLITE_OK)
    defer { sqlite3_close(db) }
    var message: UnsafeMutablePointer<CChar>?
    let code = sqlite3_exec(db, schema + "\n" + sql, nil, nil, &message)
    if code != SQLITE_OK {
      let text = message.map { String(cString: $0) } ?? "?"
      fatalError("fixture SQL failed: \(text)\n\(sql)")
    }
    return path
  }
}

extension SQLiteFixture {
  /// A copy of the snapshot at `path` with `sql` applied, made with plain
  /// file copying and sqlite3_exec (independently of `fanout whatif`).
  public static func copy(_ path: String, applying sql: String) -> String {
    let copy = makeTemporaryDirectory("fanout-snapshot") + "/snapshot.sqlite"
    try! FileManager.default.copyItem(atPath: path, toPath: copy)
    var db: OpaquePointer?
    precondition(sqlite3_open(copy, &db) == SQLITE_OK)
    defer { sqlite3_close(db) }
    var message: UnsafeMutablePointer<CChar>?
    if sqlite3_exec(db, sql, nil, nil, &message) != SQLITE_OK {
      fatalError("scenario SQL failed: \(message.map { String(cString: $0) } ?? "?")\n\(sql)")
    }
    return copy
  }
}

/// A second process's view of a snapshot, for concurrency tests: a plain
/// SQLite connection that waits up to 10 s for locks.
public final class SQLiteSession: @unchecked Sendable {
  private var db: OpaquePointer?

  public init(_ path: String) {
    precondition(sqlite3_open(path, &db) == SQLITE_OK)
    sqlite3_busy_timeout(db, 10_000)
  }

  deinit { sqlite3_close(db) }

  /// Runs `sql`; returns SQLite's message on failure.
  @discardableResult
  public func execute(_ sql: String) -> String? {
    var message: UnsafeMutablePointer<CChar>?
    guard sqlite3_exec(db, sql, nil, nil, &message) != SQLITE_OK else { return nil }
    defer { sqlite3_free(message) }
    return message.map { String(cString: $0) } ?? "?"
  }

  /// The first column of the first row of `sql`, as text; nil if none or on error.
  public func value(_ sql: String) -> String? {
    var statement: OpaquePointer?
    guard sqlite3_prepare_v2(db, sql, -1, &statement, nil) == SQLITE_OK else { return nil }
    defer { sqlite3_finalize(statement) }
    guard sqlite3_step(statement) == SQLITE_ROW, let text = sqlite3_column_text(statement, 0)
    else { return nil }
    return String(cString: text)
  }
}
