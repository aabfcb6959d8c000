import CSQLite

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// Whole copies of a snapshot file, consistent with one state of it: for
/// `fanout whatif`'s scenarios and `fanout prefs apply`'s checked copy.

/// Copies the snapshot at `source` into a new file at `path` with
/// `VACUUM INTO`: a consistent copy, the source opened read-only.
package func copySnapshot(
  from source: String, to path: String, busyTimeoutMilliseconds: Int
) throws(SQLiteError) {
  let original = try Connection(path: source)
  original.waitWhenBusy(milliseconds: busyTimeoutMilliseconds)
  let vacuum = try original.prepare("VACUUM INTO ?")
  vacuum.bind(1, path)
  try vacuum.insert()
}

/// Copies the snapshot at `source` into a new file at `path`, for private
/// scratch copies (it keeps the source's layout and journal mode, unlike
/// `VACUUM INTO`, which rebuilds every table and index): a consistent copy,
/// the source opened read-only.
///
/// A snapshot in rollback-journal mode is copied byte for byte inside a
/// read transaction, whose shared lock keeps every writer from committing
/// meanwhile: at 1M users (1.8 GB) 0.9–1.1 s, against 2.8–3.6 s for SQLite's
/// online backup, which reads and writes the file page by page through its
/// pager. In WAL mode committed pages may still be in the `-wal` file, so
/// there (and if the byte copy fails) the backup copies it, in one step,
/// so under one read transaction too.
package func copySnapshotPages(
  from source: String, to path: String, busyTimeoutMilliseconds: Int
) throws(SQLiteError) {
  let original = try Connection(path: source)
  original.waitWhenBusy(milliseconds: busyTimeoutMilliseconds)
  if copyInReadTransaction(original, to: path) { return }
  // A scratch copy: no fsync of its 1.8 GB (at 1M users) before it is used.
  let copy = try Connection(scratch: path)
  guard let backup = sqlite3_backup_init(copy.handle, "main", original.handle, "main") else {
    throw SQLiteError.from(copy.handle, code: sqlite3_errcode(copy.handle), sql: nil)
  }
  // A writer holding the source locked: retried, as a load waits for it.
  let deadline = ContinuousClock.now + .milliseconds(busyTimeoutMilliseconds)
  var code = sqlite3_backup_step(backup, -1)
  while (code == SQLITE_BUSY || code == SQLITE_LOCKED) && ContinuousClock.now < deadline {
    usleep(5_000)
    code = sqlite3_backup_step(backup, -1)
  }
  let finished = sqlite3_backup_finish(backup)
  guard code == SQLITE_DONE, finished == SQLITE_OK else {
    throw SQLiteError.from(copy.handle, code: code == SQLITE_DONE ? finished : code, sql: nil)
  }
}

/// The byte copy of `copySnapshotPages`, when the source is in a
/// rollback-journal mode (checked inside the transaction, so that a switch
/// to WAL just before it is seen); false, with nothing at `path`, otherwise.
private func copyInReadTransaction(_ original: Connection, to path: String) -> Bool {
  guard (try? original.execute("BEGIN; SELECT count(*) FROM sqlite_schema")) != nil else {
    return false
  }
  defer { try? original.execute("COMMIT") }
  guard let mode = try? original.prepare("PRAGMA journal_mode"), (try? mode.step()) == true,
    String(decoding: mode.textBytes(0), as: UTF8.self).lowercased() != "wal"
  else { return false }
  return original.copyMainFile(to: path)
}

extension Connection {
  /// Opens (creating) a scenario's private file, thrown away after the run:
  /// no journal, no fsync, and a page cache of 128 MB for it and its base
  /// (SQLite's default, 2 MB, made SQL that joins the members at 1M users
  /// read and write its pages with a system call each: 37 s against 30).
  /// The cache takes memory only as pages are read.
  package convenience init(scratch path: String, base: String? = nil) throws(SQLiteError) {
    try self.init(path: path, writable: true, base: base)
    try execute("PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF")
    for schema in schemas { try execute("PRAGMA \(schema).cache_size = -131072") }
  }
}
