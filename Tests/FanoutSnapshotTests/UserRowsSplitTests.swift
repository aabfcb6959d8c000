import FanoutSQLite
import FanoutTestSupport
import FanoutTime
import Foundation
import Testing

@testable import FanoutSnapshot

/// The users table read in two halves by rowid, side by side
/// (`UserRows.read(_:aside:)`), gives exactly what one read gives: the same
/// rows, zones numbered in the order one read meets them, and, when the
/// table is refused, the same refusal.
@Suite("The users table read in two halves")
struct UserRowsSplitTests {
  /// 200 users in id order; zones by row so that the second half meets
  /// zones the first never does, in an order of its own, and some the
  /// first met; daily DND on every third.
  private static let manyUsers = """
    WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 200)
    INSERT INTO users (user_id, timezone, chat_level, dnd_start, dnd_end)
      SELECT printf('u%05d', i),
        CASE WHEN i <= 100 THEN CASE i % 3 WHEN 0 THEN 'Asia/Tokyo' WHEN 1 THEN NULL ELSE 'Europe/Paris' END
          ELSE CASE i % 4 WHEN 0 THEN 'America/New_York' WHEN 1 THEN 'Asia/Tokyo'
            WHEN 2 THEN 'Australia/Sydney' ELSE 'Europe/Paris' END END,
        CASE i % 5 WHEN 0 THEN 'mentions' WHEN 1 THEN 'none' ELSE NULL END,
        CASE WHEN i % 3 = 0 THEN 22 * 60 END, CASE WHEN i % 3 = 0 THEN (i % 9) * 60 END
      FROM n;

    """

  static let cases: [(name: String, sql: String)] = [
    ("ids in rowid order", manyUsers),
    ("ids in reverse rowid order", manyUsers.replacing("FROM n;", with: "FROM n ORDER BY i DESC;")),
    (
      // Each half in order, the second's ids before the first's.
      "halves in order, not across the cut",
      manyUsers.replacing(
        "printf('u%05d', i)",
        with: "printf('u%05d', CASE WHEN i <= 100 THEN i + 100 ELSE i - 100 END)")
    ),
    (
      "an unknown zone in each half",
      manyUsers
        + "UPDATE users SET timezone = 'Mars/Olympus' WHERE user_id IN ('u00070', 'u00170');\n"
    ),
    (
      "an unknown zone in the second half",
      manyUsers + "UPDATE users SET timezone = 'Mars/Olympus' WHERE user_id = 'u00170';\n"
    ),
    (
      "a window with one end",
      manyUsers + "UPDATE users SET dnd_end = NULL WHERE user_id = 'u00153';\n"
    ),
    ("one user", "INSERT INTO users (user_id, timezone) VALUES ('u1', 'Asia/Tokyo');\n"),
    ("no user", ""),
  ]

  @Test("gives what one read gives", arguments: cases)
  func sameAsOneRead(_ scenario: (name: String, sql: String)) throws {
    let path = SQLiteFixture.make(SQLiteFixture.header + scenario.sql)
    let reads = try ConsistentReads(path: path, connections: 3, busyTimeoutMilliseconds: 1_000)
    let tzdb = TimeZoneDatabase()
    let whole = Result { () throws(SnapshotError) in try UserRows.read(reads.main, tzdb: tzdb) }
    let halves = Result { () throws(SnapshotError) in
      try UserRows.read(reads.take().connection, aside: reads.take, tzdb: tzdb)
    }
    switch (whole, halves) {
    case (.success(let x), .success(let y)):
      #expect(x.users.count == y.users.count)
      #expect((0..<x.users.count).allSatisfy { x.users[$0] == y.users[$0] })
      #expect(x.prefs == y.prefs)
      #expect(x.zone == y.zone)
      #expect(x.zones.map(\.name) == y.zones.map(\.name))
      #expect(x.zoneNames == y.zoneNames)
      #expect(
        x.dailyDND.map { $0.map { [$0.start, $0.end] } }
          == y.dailyDND.map { $0.map { [$0.start, $0.end] } })
      #expect(x.quietActions == y.quietActions)
      if scenario.name.hasPrefix("ids") { #expect(x.zones.count == 5 && x.users.count == 200) }
    case (.failure(let x), .failure(let y)):
      #expect("\(x)" == "\(y)")
      #expect(!scenario.name.hasPrefix("ids"))
    default:
      Issue.record("one read gives \(whole), two halves \(halves)")
    }
  }

  /// A row's zone is found by its name's bytes among the names met (no
  /// string made per row): over some 140 zones, hashed into a small table
  /// where names collide, NULL and 'UTC' among them, each user keeps its own.
  @Test("each user's zone is the one its row names, among many zones")
  func manyZones() throws {
    let names = try FileManager.default.contentsOfDirectory(atPath: "/usr/share/zoneinfo/America")
      .filter { !$0.contains(".") }.sorted().map { "America/" + $0 }
    let tzdb = TimeZoneDatabase()
    let zones = names.filter { (try? tzdb.zone(named: $0)) != nil } + ["UTC"]
    #expect(zones.count > 100)
    let values = zones.map { "('\($0)')" }.joined(separator: ", ")
    let path = SQLiteFixture.make(
      SQLiteFixture.header + """
        CREATE TEMP TABLE z (name TEXT);
        INSERT INTO z (name) VALUES \(values);
        WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 1000)
        INSERT INTO users (user_id, timezone)
          SELECT printf('u%05d', i),
            CASE WHEN i % 7 = 0 THEN NULL
              ELSE (SELECT name FROM z WHERE rowid = (i * 37) % \(zones.count) + 1) END
          FROM n;

        """)
    let reads = try ConsistentReads(path: path, connections: 3, busyTimeoutMilliseconds: 1_000)
    for rows in [
      try UserRows.read(reads.main, tzdb: tzdb),
      try UserRows.read(reads.take().connection, aside: reads.take, tzdb: tzdb),
    ] {
      #expect(rows.users.count == 1000)
      for u in 0..<1000 {
        let i = u + 1
        let expected = i % 7 == 0 ? "UTC" : zones[(i * 37) % zones.count]
        #expect(rows.zones[Int(rows.zone[u])].name == expected, "user \(i)")
      }
      #expect(rows.zoneNames.count == Set(rows.zones.map(\.name)).count)
    }
  }

  /// An overlay's users (a what-if's B) take the zones A already read by
  /// name: no tz file is read again for them — here a database with no
  /// file at all — while a zone A lacks is still looked up, and refused.
  @Test("zones already known are taken, not read again")
  func knownZones() throws {
    let path = SQLiteFixture.make(SQLiteFixture.header + Self.manyUsers)
    // (Each read in halves takes two connections of its own.)
    func reads() throws -> ConsistentReads {
      try ConsistentReads(path: path, connections: 3, busyTimeoutMilliseconds: 1_000)
    }
    let real = try UserRows.read(try reads().main, tzdb: TimeZoneDatabase())
    #expect(real.zones.count == 5)
    let empty = TimeZoneDatabase(root: "/nonexistent/fanout-test-zoneinfo")
    func halves(_ known: [ZoneTable]) throws -> UserRows {
      let split = try reads()
      return try UserRows.read(
        split.take().connection, aside: split.take, tzdb: empty, knownZones: known)
    }
    for rows in [
      try UserRows.read(try reads().main, tzdb: empty, knownZones: real.zones),
      try halves(real.zones),
    ] {
      #expect(rows.zones == real.zones)
      #expect(rows.zone == real.zone)
    }
    let lacking = real.zones.filter { $0.name != "Australia/Sydney" }
    for read in [
      { () throws -> UserRows in
        try UserRows.read(try reads().main, tzdb: empty, knownZones: lacking)
      },
      { () throws -> UserRows in try halves(lacking) },
    ] {
      do {
        _ = try read()
        Issue.record("a zone neither known nor in the database was taken")
      } catch {
        #expect("\(error)".contains("Australia/Sydney"))
      }
    }
  }
}
