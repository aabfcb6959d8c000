import FanoutSQLite
import FanoutSnapshot
import FanoutTestSupport
import FanoutWhatIf
import Foundation
import Synchronization
import Testing

/// `fanout whatif --sql` applies its SQL to a scratch copy of A; the copy
/// must be one committed state of A even while a writer commits to it.
@Suite("Scratch copies of a snapshot")
struct ScenarioCopyTests {
  /// A file of about 16 MB whose every commit adds rows across many pages
  /// and moves a running total with them.
  private func makeSource(journal: String) -> String {
    let path = makeTemporaryDirectory() + "/source.sqlite"
    let session = SQLiteSession(path)
    #expect(session.execute("PRAGMA journal_mode = \(journal)") == nil)
    #expect(
      session.execute(
        """
        CREATE TABLE t (k INTEGER PRIMARY KEY, payload BLOB);
        CREATE TABLE total (n INTEGER);
        INSERT INTO total VALUES (0);
        """) == nil)
    for _ in 0..<40 { commit(session) }
    return path
  }

  /// One writer's transaction: 100 rows of 4 KiB, and the total.
  private func commit(_ session: SQLiteSession) {
    session.execute(
      """
      BEGIN IMMEDIATE;
      WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r WHERE i < 100)
      INSERT INTO t (payload) SELECT randomblob(4096) FROM r;
      UPDATE total SET n = n + 100;
      COMMIT;
      """)
  }

  /// Copies `source` repeatedly while a writer commits to it; each copy
  /// must be whole (integrity check) and one state (rows = total).
  private func copiesWhileWriting(journal: String) {
    let source = makeSource(journal: journal)
    let stop = Atomic<Bool>(false)
    let commits = Atomic<Int>(0)
    let writer = Thread {
      let session = SQLiteSession(source)
      while !stop.load(ordering: .relaxed) {
        self.commit(session)
        commits.add(1, ordering: .relaxed)
      }
    }
    writer.start()
    defer { stop.store(true, ordering: .relaxed) }
    let folder = makeTemporaryDirectory()
    for k in 0..<8 {
      let copy = folder + "/copy-\(k).sqlite"
      do {
        try copySnapshotPages(
          from: source, to: copy,
          busyTimeoutMilliseconds: SnapshotLoader.defaultBusyTimeoutMilliseconds)
      } catch {
        Issue.record("copy \(k): \(error.message)")
        continue
      }
      let session = SQLiteSession(copy)
      #expect(session.value("PRAGMA integrity_check") == "ok", "copy \(k)")
      let rows = session.value("SELECT count(*) FROM t")
      #expect(rows != nil && rows == session.value("SELECT n FROM total"), "copy \(k)")
    }
    #expect(commits.load(ordering: .relaxed) > 0, "the writer never committed")
  }

  @Test("rollback-journal mode: copied byte for byte under a read transaction, one state")
  func rollbackJournal() { copiesWhileWriting(journal: "DELETE") }

  @Test("WAL mode: copied by SQLite's backup, one state")
  func wal() { copiesWhileWriting(journal: "WAL") }

  @Test("WAL mode: commits not yet checkpointed into the file are in the copy")
  func walNotCheckpointed() throws {
    let source = makeSource(journal: "WAL")
    let session = SQLiteSession(source)
    #expect(session.execute("PRAGMA wal_autocheckpoint = 0") == nil)
    for _ in 0..<5 { commit(session) }  // held open: the -wal file stays
    let copy = makeTemporaryDirectory() + "/copy.sqlite"
    try copySnapshotPages(
      from: source, to: copy, busyTimeoutMilliseconds: SnapshotLoader.defaultBusyTimeoutMilliseconds
    )
    #expect(SQLiteSession(copy).value("SELECT n FROM total") == "4500")
  }

  @Test("a quiet rollback-journal snapshot is copied byte for byte")
  func sameBytes() throws {
    let source = makeSource(journal: "DELETE")
    let copy = makeTemporaryDirectory() + "/copy.sqlite"
    try copySnapshotPages(
      from: source, to: copy, busyTimeoutMilliseconds: SnapshotLoader.defaultBusyTimeoutMilliseconds
    )
    #expect(
      FileManager.default.contents(atPath: copy) == FileManager.default.contents(atPath: source))
  }
}
