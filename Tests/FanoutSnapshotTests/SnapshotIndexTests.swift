import FanoutSnapshot
import FanoutTestSupport
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
