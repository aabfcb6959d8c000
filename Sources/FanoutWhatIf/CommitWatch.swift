import FanoutSQLite
import FanoutSnapshot
import Synchronization

/// Tells whether any commit has landed on a snapshot file since the watch
/// began: for readers that read one file in several passes that no single
/// read transaction can span (`fanout whatif --sql` loads A while `VACUUM
/// INTO` copies it), so that they can refuse to mix two states.
public final class CommitWatch: @unchecked Sendable {
  /// `@unchecked Sendable`: the connection is used under the lock only.
  private let connection: Connection
  private let first: [Int64]
  private let lock = Mutex(())

  public init(path: String) throws(SnapshotError) {
    do {
      connection = try Connection(path: path)
      connection.waitWhenBusy(milliseconds: SnapshotLoader.defaultBusyTimeoutMilliseconds)
      first = try connection.dataVersion()
    } catch {
      throw SnapshotError.opening(path, error)
    }
  }

  /// Whether a commit landed since the watch began (true too when it
  /// cannot tell).
  public func committedSince() -> Bool {
    lock.withLock { _ in (try? connection.dataVersion()).map { $0 != first } ?? true }
  }
}
