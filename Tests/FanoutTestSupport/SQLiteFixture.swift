import CSQLite
import FanoutSnapshot
import Foundation

/// Builds real SQLite snapshot files from SQL text.
public enum SQLiteFixture {
  /// The contract's schema, as the snapshot module defines it.
  public static let schema: String = SnapshotSchema.createSQL

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
