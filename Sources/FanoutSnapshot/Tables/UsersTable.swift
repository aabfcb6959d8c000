import FanoutIndex
import FanoutModel
import FanoutSQLite
import FanoutTime

/// `users`: ids in byte order, their own levels, time zone, daily DND and
/// quiet action; and `dnd_weekly`, which only names users.
struct UserRows: Sendable {
  var users = StringTable()
  var prefs: [LevelRow] = []
  var zone: [UInt16] = []
  var zones: [ZoneTable] = []
  /// The zone names met, sorted (`snapshot check`).
  var zoneNames: [String] = []
  var dailyDND: [(start: Int, end: Int)?] = []
  /// Per user: quiet_action, nil where NULL (then default_quiet_action
  /// decides, at build time: a what-if changing only the settings keeps
  /// these rows).
  var quietActions: [QuietAction?] = []

  /// - Parameter known: the ids of a snapshot read before (a what-if's
  ///   A, under an overlay of it): when the rows' ids are the same, their
  ///   table is `known`, not built again.
  static func read(_ connection: Connection, tzdb: TimeZoneDatabase, known: StringTable? = nil)
    throws(SnapshotError) -> UserRows
  {
    let capacity = try connection.rowCount("users")
    return try connection.readInIDOrder("user_id") { orderBy throws(SnapshotError) in
      try read(connection, orderBy: orderBy, capacity: capacity, tzdb: tzdb, known: known)
    }
  }

  private static func read(
    _ connection: Connection, orderBy: String?, capacity: Int, tzdb: TimeZoneDatabase,
    known: StringTable?
  ) throws(SnapshotError) -> UserRows {
    let r = try connection.reader("users", key: [0], orderBy: orderBy)
    var rows = UserRows()
    // The ids are gathered first and hashed in one batched pass at the end
    // (`StringTable(indexing:)`), where a lookup table built row by row
    // waits on a cache miss per id.
    var ids = BytePool()
    ids.reserveCapacity(strings: capacity, bytes: 0)
    var zoneIDs: [String: UInt16] = [:]
    while try r.next() {
      let id = try r.textBytes(0)
      if let last = ids.count > 0 ? ids.count - 1 : nil {
        if ids.equals(last, id) { throw r.fail(0, "duplicate key") }
        guard ids.precedes(last, id) else {
          // In rowid order this sends the read to id order (`readInIDOrder`),
          // where it cannot happen: the text is UTF-8 (`checkEncoding`).
          throw r.fail(0, "user ids are not in byte order")
        }
      }
      ids.append(id)  // strictly after its predecessor, so new
      rows.prefs.append(try LevelRow(r, first: 1))
      let zoneName = try r.optionalText(8) ?? "UTC"
      if let z = zoneIDs[zoneName] {
        rows.zone.append(z)
      } else {
        do {
          rows.zones.append(try tzdb.zone(named: zoneName))
        } catch {
          throw r.fail(8, "unknown time zone \(Bounded.quoted(zoneName)) (\(error.reason))")
        }
        zoneIDs[zoneName] = UInt16(rows.zones.count - 1)
        rows.zone.append(UInt16(rows.zones.count - 1))
      }
      switch (try r.optionalMinute(9), try r.optionalMinute(10)) {
      case (nil, nil): rows.dailyDND.append(nil)
      case (let start?, let end?): rows.dailyDND.append((start, end))
      case (nil, _): throw r.fail(9, "dnd_start is NULL but dnd_end is set (both or neither)")
      case (_, nil): throw r.fail(10, "dnd_end is NULL but dnd_start is set (both or neither)")
      }
      rows.quietActions.append(try r.enumerated(12, "drop or defer", QuietAction.init(rawValue:)))
    }
    rows.zoneNames = zoneIDs.keys.sorted()
    if let known, ids.sameStrings(as: known.pool) {
      rows.users = known
    } else {
      rows.users = StringTable(indexing: ids)
    }
    return rows
  }
}

/// `dnd_weekly`: weekly windows, which replace a user's daily window.
enum WeeklyTable {
  static func read(_ connection: Connection, users: StringTable) throws(SnapshotError)
    -> [(user: Int32, weekday: Int, start: Int, end: Int)]
  {
    let r = try connection.reader("dnd_weekly", key: [0, 1, 2])
    var weekly: [(user: Int32, weekday: Int, start: Int, end: Int)] = []
    while try r.next() {
      let u = try r.user(0, in: users)
      let weekday = try r.int(1)
      guard (1...7).contains(weekday) else { throw r.fail(1, "weekday \(weekday) is outside 1..7") }
      let start = try r.minute(2)
      let end = try r.minute(3)
      guard start < end else { throw r.fail(3, "end_min \(end) is not after start_min \(start)") }
      weekly.append((u, Int(weekday), start, end))
    }
    return weekly
  }
}
