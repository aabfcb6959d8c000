import FanoutSnapshot
import FanoutTestSupport
import Foundation
import Synchronization
import Testing

/// A snapshot is read at one point in time, whatever a writer commits
/// meanwhile, in both of SQLite's journal modes; a locked one is waited for,
/// then reported busy.
@Suite("Snapshot read at one point in time")
struct SnapshotConsistencyTests {
  /// One consistent group: a user, their channel, the membership and a device.
  static func group(_ k: Int) -> String {
    let id = String(format: "%06d", k)
    return """
      INSERT INTO users (user_id) VALUES ('u\(id)');
      INSERT INTO channels VALUES ('c\(id)', 'group');
      INSERT INTO members VALUES ('c\(id)', 'u\(id)');
      INSERT INTO devices (user_id, gateway, token) VALUES ('u\(id)', 'apns', 't\(id)');
      """
  }

  @Test(
    "loads during a stream of commits each see one committed state",
    arguments: ["WAL", "DELETE"])
  func concurrentWriter(journalMode: String) throws {
    let path = SQLiteFixture.make(
      SQLiteFixture.header + (0..<200).map(Self.group).joined()
        + "PRAGMA journal_mode=\(journalMode);")
    let stop = Atomic<Bool>(false)
    let writer = Thread {
      let session = SQLiteSession(path)
      var k = 200
      while !stop.load(ordering: .relaxed) {
        if let error = session.execute("BEGIN IMMEDIATE;" + Self.group(k) + "COMMIT;") {
          Issue.record("writer: \(error)")
          return
        }
        k += 1
        // A writer that never lets go starves every reader in rollback-journal
        // mode (the load then reports busy); a real exporter pauses between commits.
        usleep(2_000)
      }
    }
    writer.start()
    defer { stop.store(true, ordering: .relaxed) }
    for _ in 0..<25 {
      let info = try SnapshotLoader.load(path: path).info
      let rows = Dictionary(uniqueKeysWithValues: info.rowCounts.map { ($0.table, $0.rows) })
      #expect(rows["users"]! >= 200)
      // Each commit adds one row to each table: any torn read shows as a difference.
      #expect(
        [rows["channels"], rows["members"], rows["devices"]]
          == Array(repeating: rows["users"], count: 3),
        "\(rows)")
    }
  }

  @Test("a snapshot locked by a writer is waited for, then reported busy (exit 75)")
  func busy() throws {
    let path = SQLiteFixture.make(SQLiteFixture.header + Self.group(1))
    let holder = SQLiteSession(path)
    #expect(holder.execute("BEGIN EXCLUSIVE; INSERT INTO users (user_id) VALUES ('x');") == nil)
    let started = ContinuousClock.now
    #expect {
      try SnapshotLoader.load(path: path, busyTimeoutMilliseconds: 300)
    } throws: { error in
      guard let error = error as? SnapshotError else { return false }
      return error.busy && error.exitStatus.rawValue == 75
        && error.description.hasPrefix("snapshot busy: ")
    }
    #expect(ContinuousClock.now - started >= .milliseconds(300))
    let out = makeTemporaryDirectory() + "/out"
    let result = runProcess(
      fanoutExecutable,
      [
        "eval", "--snapshot", path, "--messages", "/dev/null", "--out", out, "--busy-timeout",
        "200",
      ])
    #expect(result.status == 75, "\(result.stderr)")
    #expect(result.stderr.contains("snapshot busy"))
    #expect(!FileManager.default.fileExists(atPath: out))
    // Once the writer commits, the load goes through and sees its row.
    #expect(holder.execute("COMMIT") == nil)
    #expect(try SnapshotLoader.load(path: path).index.users.count == 2)
  }

  @Test("the snapshot path's own faults are named in plain words")
  func pathFaults() throws {
    let folder = makeTemporaryDirectory()
    let empty = folder + "/empty.sqlite"
    FileManager.default.createFile(atPath: empty, contents: nil)
    for (path, words) in [
      (folder, "is a folder, not a snapshot file"),
      (empty, "is an empty file, not a SQLite database"),
      (folder + "/missing.sqlite", "No such file or directory"),
    ] {
      #expect {
        try SnapshotLoader.load(path: path)
      } throws: { error in
        (error as? SnapshotError)?.description.contains(words) == true
      }
    }
  }
}

@Suite("Snapshot files another user reads")
struct SnapshotOtherUserTests {
  /// A WAL snapshot in a folder its reader cannot write cannot be read
  /// (SQLite needs its -shm file); the error says so and what to change.
  @Test("a WAL snapshot in a folder the reader cannot write: a clear error")
  func walReadOnlyFolder() throws {
    let nobody = ["-u", "nobody", "--"]
    guard getuid() == 0,
      runProcess("/usr/sbin/runuser", nobody + ["test", "-x", fanoutExecutable]).status == 0
    else {
      print("skipped: needs root and a fanout binary that the user nobody can run")
      return
    }
    let folder = makeTemporaryDirectory()
    let path = folder + "/s.sqlite"
    try FileManager.default.copyItem(
      atPath: SQLiteFixture.make(SQLiteFixture.header + "PRAGMA journal_mode = WAL;"), toPath: path)
    chmod(folder, 0o755)
    chmod(path, 0o644)
    let result = runProcess(
      "/usr/sbin/runuser", nobody + [fanoutExecutable, "snapshot", "check", path])
    #expect(result.status == 65)
    #expect(result.stderr.contains("the snapshot is in WAL mode"), "\(result.stderr)")
    #expect(result.stderr.contains("PRAGMA journal_mode=DELETE"))
    // The same file in rollback-journal mode reads fine.
    let delete = SQLiteSession(path)
    #expect(delete.execute("PRAGMA journal_mode = DELETE") == nil)
    let ok = runProcess(
      "/usr/sbin/runuser", nobody + [fanoutExecutable, "snapshot", "check", path])
    #expect(ok.status == 0, "\(ok.stderr)")
  }
}
