import FanoutSnapshot
import FanoutTestSupport
import Foundation
import Testing

@Suite("Snapshot index")
struct SnapshotIndexTests {
  @Test("users are numbered in byte order of their ids, members follow that order")
  func byteOrder() throws {
    // Byte order: 'B' (0x42) < 'a' (0x61) < 'é' (0xC3 0xA9); a locale-aware sort would differ.
    let sql = """
      INSERT INTO users (user_id) VALUES ('é'), ('a'), ('B'), ('a10'), ('a9');
      INSERT INTO channels VALUES ('c', 'group');
      INSERT INTO members SELECT 'c', user_id FROM users;
      """
    let index = try SnapshotLoader.load(path: SQLiteFixture.make(SQLiteFixture.header + sql)).index
    #expect((0..<index.users.count).map { index.users[$0] } == ["B", "a", "a10", "a9", "é"])
    #expect(Array(index.members(of: 0)) == [0, 1, 2, 3, 4])
  }

  /// `memberSlot` (a read line's membership, contract v3): members spread
  /// evenly, bunched at one end, or every other row, each user found in
  /// its slot and each non-member not at all.
  @Test("a member's slot is found in large and small channels, however the rows spread")
  func memberSlots() throws {
    let sql = """
      WITH RECURSIVE n(k) AS (SELECT 0 UNION ALL SELECT k + 1 FROM n WHERE k < 2999)
      INSERT INTO users (user_id) SELECT printf('u%04d', k) FROM n;
      INSERT INTO channels VALUES ('all', 'broadcast'), ('bunched', 'group'), ('odd', 'group'),
        ('few', 'group'), ('none', 'group');
      INSERT INTO members SELECT 'all', user_id FROM users;
      INSERT INTO members SELECT 'bunched', user_id FROM users
        WHERE user_id < 'u0300' OR user_id IN ('u1500', 'u2998', 'u2999');
      INSERT INTO members SELECT 'odd', user_id FROM users WHERE CAST(substr(user_id, 2) AS INTEGER) % 2 = 1;
      INSERT INTO members VALUES ('few', 'u0007'), ('few', 'u2000');
      """
    let index = try SnapshotLoader.load(path: SQLiteFixture.make(SQLiteFixture.header + sql)).index
    for c in 0..<index.channels.count {
      let slots = index.members(of: Int32(c))
      var expected = [Int?](repeating: nil, count: index.users.count)
      for (k, user) in zip(slots.indices, slots) { expected[Int(user)] = k }
      let found = (0..<index.users.count).map { index.memberSlot(user: Int32($0), channel: c) }
      #expect(found == expected, "channel \(index.channels[c])")
    }
  }

  @Test("tables written out of id order, or without rowids, load as if written in order")
  func writingOrder() throws {
    let rows = """
      INSERT INTO users (user_id) VALUES ('u3'), ('u1'), ('u2');
      INSERT INTO channels VALUES ('c2', 'group'), ('c1', 'direct');
      INSERT INTO members VALUES ('c2', 'u3'), ('c1', 'u2'), ('c2', 'u1'), ('c1', 'u1');
      """
    // The same tables as WITHOUT ROWID: scanned in key order, no rowids to sample.
    let withoutRowIDs = SQLiteFixture.schema.components(separatedBy: "CREATE TABLE ").map {
      ["users (", "channels (", "members ("].contains(where: $0.hasPrefix)
        ? $0.replacingOccurrences(of: "\n);", with: "\n) WITHOUT ROWID;") : $0
    }.joined(separator: "CREATE TABLE ")
    #expect(withoutRowIDs.components(separatedBy: "WITHOUT ROWID").count == 4)
    for schema in [SQLiteFixture.schema, withoutRowIDs] {
      let index = try SnapshotLoader.load(
        path: SQLiteFixture.make(SQLiteFixture.header + rows, schema: schema)
      ).index
      #expect((0..<index.users.count).map { index.users[$0] } == ["u1", "u2", "u3"])
      #expect((0..<index.channels.count).map { index.channels[$0] } == ["c1", "c2"])
      #expect(index.channelScope == [.direct, .group])
      #expect(Array(index.members(of: 0)) == [0, 1])
      #expect(Array(index.members(of: 1)) == [0, 2])
    }
  }

  @Test("equal DND schedules share one pattern; snooze groups are interned")
  func interning() throws {
    let sql = """
      INSERT INTO users (user_id, dnd_start, dnd_end, snooze_until) VALUES
        ('a', 60, 120, 5), ('b', 60, 120, 5), ('c', 60, 121, NULL);
      """
    let info = try SnapshotLoader.load(path: SQLiteFixture.make(SQLiteFixture.header + sql)).info
    #expect(info.dndPatterns == 2)
    #expect(info.timeZones == ["UTC"])
  }
}
