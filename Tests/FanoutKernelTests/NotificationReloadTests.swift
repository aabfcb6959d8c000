import FanoutEngine
import FanoutIndex
import FanoutKernel
import FanoutPipeline
import FanoutSnapshot
import FanoutTestSupport
import Testing

/// A stream's reload moves the notification state to the new snapshot by
/// user id and channel id (`NotificationJudge.inherit`).
@Suite("Contract v3: notification state through a snapshot reload")
struct NotificationReloadTests {
  static let settings = """
    INSERT INTO settings VALUES ('notification_groups', 'on'), ('notification_group_size_max', '2'),
      ('notification_group_count_max', '2');
    """

  static func index(_ sql: String) throws -> Index {
    try SnapshotLoader.load(
      path: SQLiteFixture.make(
        SQLiteFixture.header + settings + sql, schema: SQLiteFixture.v2Schema)
    ).index
  }

  /// Messages in three channels, in ts order, and reads by `a` some
  /// `readLag` ms back: at 15 they remove all of a group's unread ones,
  /// at 35 some (the rest wait behind a removed prefix through the reload).
  static func lines(readLag: Int) -> [String] {
    (0..<24).map { i in
      if i % 5 == 4 {
        return
          #"{"id":"r\#(i)","event":"read","channel":"g\#(i % 3)","user":"a","ts":\#(i * 10 - readLag)}"#
      }
      return
        #"{"id":"m\#(i)","channel":"g\#(i % 3)","sender":"s","ts":\#(i * 10)\#(i % 7 == 0 ? #","kind":"call""# : "")}"#
    }
  }

  /// Per message line, per user id: `group,id,badge,hides`; and the removals.
  static func run(_ ledgers: Ledgers, _ lines: ArraySlice<String>) -> (
    fields: [String], removed: [String]
  ) {
    let judge = ledgers.notifications!
    judge.recordsRemovals = true
    let batch = parseTraffic(Array(lines), index: judge.index)
    #expect(batch.rejections.isEmpty)
    let plan = Engine.planChunks([batch], index: judge.index, chunkPairs: 3)
    let wave = ledgers.judge([batch], plan: plan).notifications!
    var fields: [String] = []
    let f = wave.fields[0]
    for m in 0..<batch.count {
      for k in Int(f.starts[m])..<Int(f.starts[m + 1]) {
        let note = f.notes[k]
        fields.append(
          "\(batch.idJSON.string(m)) \(judge.index.users[Int(note.user)]) "
            + "\(note.group),\(note.id),\(note.badge),\(Array(f.hidden(by: k)))")
      }
    }
    let removed = wave.removals.map {
      "\(judge.index.users[Int($0.user)]) \($0.removed) \($0.cancelled) \($0.badge)"
    }
    return (fields, removed)
  }

  @Test(
    "renumbered users and channels: the lines after the reload as if there had been none",
    arguments: [15, 35])
  func renumbered(readLag: Int) throws {
    let lines = Self.lines(readLag: readLag)
    let members = """
      INSERT INTO devices VALUES (1, 'a', 'apns', 'ta'), (2, 'b', 'fcm', 'tb');
      INSERT INTO members SELECT c.channel_id, u.user_id FROM channels c, users u;
      """
    let a = try Self.index(
      """
      INSERT INTO users (user_id) VALUES ('a'), ('b'), ('s');
      INSERT INTO channels (channel_id, kind) VALUES ('g0', 'group'), ('g1', 'group'), ('g2', 'group');
      """ + members)
    // New rows before the old ones: every user and channel row moves.
    let b = try Self.index(
      """
      INSERT INTO users (user_id) VALUES ('0new'), ('a'), ('b'), ('s');
      INSERT INTO channels (channel_id, kind) VALUES ('0c', 'group'), ('g0', 'group'), ('g1', 'group'), ('g2', 'group');
      """ + members)
    #expect(b.users.find("a") != a.users.find("a"))
    let wholeLedgers = try #require(Ledgers(index: b, threads: 2))
    let whole = Self.run(wholeLedgers, lines[...])
    let before = try #require(Ledgers(index: a, threads: 2))
    let first = Self.run(before, lines[..<12])
    let after = try #require(Ledgers(index: b, threads: 3))
    after.inherit(from: before)
    let second = Self.run(after, lines[12...])
    #expect(first.fields + second.fields == whole.fields)
    #expect(first.removed + second.removed == whole.removed)
    #expect(whole.removed.count >= 2, "\(whole.removed)")
    let counters = try #require(wholeLedgers.notifications?.ledger.counters)
    #expect(after.notifications?.ledger.counters == counters)
    #expect(counters.hidden > 0)
  }
}
