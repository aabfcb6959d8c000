import CSQLite
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// Connections to one snapshot whose read transactions all see the same
/// committed state, so that tables read on several connections at once
/// still come from one point in time (a snapshot is read at one point in
/// time, whatever a writer commits meanwhile).
///
/// How: every connection opens a read transaction (`BEGIN`, then a first
/// read, which is what pins the state), and an observer connection's
/// `PRAGMA data_version` taken before the first and after the last tells
/// whether any commit landed in between. If one did, the transactions are
/// ended and taken again. In rollback-journal mode the first transaction's
/// shared lock keeps writers out until the load ends; in WAL mode writers go
/// on, unseen by these transactions.
///
/// SQLite reports a locked database (a writer holding it in rollback-journal
/// mode) as busy. No connection waits while the others hold their locks — a
/// writer waiting for our shared locks to go would wait for us while we wait
/// for it — : on busy, all transactions are ended and taken again shortly
/// after, for up to `busyTimeoutMilliseconds`; then an `SQLiteError` with
/// the result code `SQLITE_BUSY_TIMEOUT` (`ResultCode.busyTimeout`): a
/// temporary condition, not a refusal.
package final class ConsistentReads: @unchecked Sendable {
  /// The connection the load starts on; the others are handed out by `take()`.
  package let main: Connection
  /// `@unchecked Sendable`: the spare connections are behind the mutex, and
  /// each is used by one thread at a time once taken.
  private let spares: Mutex<[Connection]>

  /// With a `base`, each connection attaches it (`Connection.init(path:writable:base:)`)
  /// and the transactions pin its state too.
  package init(
    path: String, base: String? = nil, connections count: Int, busyTimeoutMilliseconds: Int
  ) throws(SQLiteError) {
    let deadline = ContinuousClock.now + .milliseconds(busyTimeoutMilliseconds)
    let timedOut = SQLiteError(
      code: ResultCode.busyTimeout.rawValue,
      message: "still locked by a writer after \(busyTimeoutMilliseconds) ms", sql: nil)
    let observer = try Connection(path: path, base: base)
    let connections = try (0..<max(1, count)).map { _ throws(SQLiteError) in
      try Connection(path: path, base: base)
    }
    while true {
      do throws(SQLiteError) {
        let before = try observer.dataVersion()
        for connection in connections { try connection.beginRead() }
        if try observer.dataVersion() == before { break }
        for connection in connections { try connection.execute("ROLLBACK") }
      } catch {
        for connection in connections { try? connection.execute("ROLLBACK") }
        guard error.isBusy else { throw error }
        guard ContinuousClock.now < deadline else { throw timedOut }
      }
      guard ContinuousClock.now < deadline else { throw timedOut }
      usleep(1_000)  // a writer holds the file or committed meanwhile: let it finish
    }
    for connection in connections { connection.waitWhenBusy(milliseconds: busyTimeoutMilliseconds) }
    main = connections[0]
    spares = Mutex(Array(connections.dropFirst()))
  }

  /// Ends the read transactions still held here, releasing the file to
  /// writers while these connections stay referenced (those handed out
  /// end theirs when the reads they were taken for let them go).
  package func endReads() {
    try? main.execute("ROLLBACK")
    spares.withLock { connections in
      for connection in connections { try? connection.execute("ROLLBACK") }
    }
  }

  /// A connection of its own for a table read on another thread.
  package func take() -> HandedConnection {
    guard let connection = spares.withLock({ $0.popLast() }) else {
      preconditionFailure("more connections taken than ConsistentReads opened")
    }
    return HandedConnection(connection: connection)
  }
}

/// A connection moved to the thread that reads with it.
///
/// `@unchecked Sendable`: SQLite connections opened with `SQLITE_OPEN_NOMUTEX`
/// may move between threads as long as one thread uses them at a time,
/// which the handing over guarantees.
package struct HandedConnection: @unchecked Sendable {
  package let connection: Connection
}

extension Connection {
  /// Lets SQLite retry for up to this long when the database is locked.
  package func waitWhenBusy(milliseconds: Int) {
    sqlite3_busy_timeout(handle, Int32(clamping: milliseconds))
  }

  /// Starts a read transaction and pins it to the current committed state
  /// (of the attached base too).
  package func beginRead() throws(SQLiteError) {
    try execute("BEGIN")
    for schema in schemas {
      let first = try prepare("SELECT count(*) FROM \(schema).sqlite_master")
      _ = try first.step()
    }
  }

  /// `PRAGMA data_version` (of the main file, then of the attached base):
  /// changes when another connection commits.
  package func dataVersion() throws(SQLiteError) -> [Int64] {
    try schemas.map { schema throws(SQLiteError) in
      let statement = try prepare("PRAGMA \(schema).data_version")
      return try statement.step() ? statement.int64(0) : 0
    }
  }
}
