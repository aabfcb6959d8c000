import FanoutIndex
import FanoutModel
import FanoutSQLite

/// Contract v2's per-user tables: `user_mutes`, `thread_prefs`, `presence`.
enum UserMutesTable {
  static func read(_ connection: Connection, users: StringTable) throws(SnapshotError)
    -> [(user: Int32, muted: Int32)]
  {
    let r = try connection.reader("user_mutes", key: [0, 1])
    var seen: Set<UInt64> = []
    var mutes: [(user: Int32, muted: Int32)] = []
    while try r.next() {
      let u = try r.user(0, in: users)
      let muted = try r.user(1, in: users)
      guard seen.insert(UInt64(UInt32(u)) << 32 | UInt64(UInt32(muted))).inserted else {
        throw r.fail(nil, "duplicate key")
      }
      mutes.append((u, muted))
    }
    return mutes
  }
}

struct ThreadPrefRows: Sendable {
  /// Every thread id a row names, numbered in order of first sight.
  var threads = StringTable()
  var rows: [(user: Int32, channel: Int32, thread: Int32, level: Level)] = []

  static func read(_ connection: Connection, users: StringTable, channels: StringTable)
    throws(SnapshotError) -> ThreadPrefRows
  {
    let r = try connection.reader("thread_prefs", key: [0, 1, 2])
    var result = ThreadPrefRows()
    var seen: Set<[Int32]> = []
    while try r.next() {
      let u = try r.user(0, in: users)
      let c = try r.channel(1, in: channels)
      let id = try r.textBytes(2)
      let thread = result.threads.find(id) ?? result.threads.insert(id)!
      let level = try r.required(3, "all, mentions or none", Level.init(chatLevel:))
      guard seen.insert([u, c, thread]).inserted else { throw r.fail(nil, "duplicate key") }
      result.rows.append((u, c, thread, level))
    }
    return result
  }
}

enum PresenceTable {
  static func read(_ connection: Connection, users: StringTable) throws(SnapshotError)
    -> [(user: Int32, from: Int64, until: Int64)]
  {
    let r = try connection.reader("presence", key: [0, 1, 2])
    var presence: [(user: Int32, from: Int64, until: Int64)] = []
    while try r.next() {
      presence.append((try r.user(0, in: users), try r.int(1), try r.int(2)))
    }
    return presence
  }
}
