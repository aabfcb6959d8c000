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

  /// - Parameters:
  ///   - known: the ids of a snapshot read before (a what-if's A, under
  ///     an overlay of it): when the rows' ids are the same, their table
  ///     is `known`, not built again.
  ///   - knownZones: that snapshot's zones, read from the same tz
  ///     database: a zone named as one of them is taken, not read again.
  ///   - timesOnly: read only the ids and the columns of the users'
  ///     times (zone, daily DND, quiet action), leaving `prefs` empty: for
  ///     rows whose levels are known to be those of a snapshot read before.
  static func read(
    _ connection: Connection, tzdb: TimeZoneDatabase, known: StringTable? = nil,
    knownZones: [ZoneTable] = [], timesOnly: Bool = false
  ) throws(SnapshotError) -> UserRows {
    let capacity = try connection.rowCount("users")
    let zones = Zones(tzdb, knownZones)
    return try connection.readInIDOrder("user_id") { orderBy throws(SnapshotError) in
      try Part.read(
        connection, orderBy: orderBy, capacity: capacity, zones: zones, timesOnly: timesOnly
      ).finished(known: known)
    }
  }

  /// The columns a `timesOnly` read reads: user_id, timezone, dnd_start,
  /// dnd_end, quiet_action.
  private static let timeColumns: Set<Int32> = [0, 8, 9, 10, 12]

  /// `read`, in two halves by rowid side by side, the second on a
  /// connection of its own (`aside`, taken only then): for a read no
  /// other table's overlaps (a what-if's B of other quiet hours waits on
  /// its users alone). Unless both halves are read without a fault and
  /// their ids ascend across the cut, the table is read again by `read`,
  /// whose answer — rows, or the refusal — is then the one given.
  static func read(
    _ connection: Connection, aside: () -> HandedConnection, tzdb: TimeZoneDatabase,
    known: StringTable? = nil, knownZones: [ZoneTable] = [], timesOnly: Bool = false
  ) throws(SnapshotError) -> UserRows {
    func readWhole() throws(SnapshotError) -> UserRows {
      try read(
        connection, tzdb: tzdb, known: known, knownZones: knownZones, timesOnly: timesOnly)
    }
    guard let middle = middleRowid(connection) else { return try readWhole() }
    let zones = Zones(tzdb, knownZones)
    let handed = aside()
    let later = Pending { () -> Result<Part, SnapshotError> in
      Result { () throws(SnapshotError) in
        try Part.read(
          handed.connection, rowids: "rowid >= \(middle)", zones: zones, timesOnly: timesOnly)
      }
    }
    let first = Result { () throws(SnapshotError) in
      try Part.read(connection, rowids: "rowid < \(middle)", zones: zones, timesOnly: timesOnly)
    }
    let second = later.wait()  // (ended before any answer, a refusal too)
    guard case .success(var rows) = first, case .success(let second) = second,
      rows.append(second)
    else { return try readWhole() }
    return rows.finished(known: known)
  }

  /// Where a read finds the zones its rows name: among those already
  /// known by name, else in the tz database.
  private struct Zones: Sendable {
    let tzdb: TimeZoneDatabase
    let known: [String: ZoneTable]

    init(_ tzdb: TimeZoneDatabase, _ known: [ZoneTable]) {
      self.tzdb = tzdb
      self.known = Dictionary(known.map { ($0.name, $0) }) { first, _ in first }
    }

    func zone(named name: String) throws(TimeZoneError) -> ZoneTable {
      if let zone = known[name] { return zone }
      return try tzdb.zone(named: name)
    }
  }

  /// The rowid halfway between the users table's least and greatest; nil
  /// when it has fewer than two rows, or no rowid.
  private static func middleRowid(_ connection: Connection) -> Int64? {
    guard let span = try? connection.rowidSpan(of: "users"),
      span.lowerBound < span.upperBound
    else { return nil }
    // The span of any two Int64s fits a UInt64; the middle lies between them.
    let width = UInt64(bitPattern: span.upperBound &- span.lowerBound)
    return span.lowerBound &+ Int64(bitPattern: width / 2 + 1)
  }

  /// Some of the table's rows, read in order: ids not yet indexed, and
  /// zones numbered in the order met.
  private struct Part: Sendable {
    var rows = UserRows()
    var ids = BytePool()
    var zoneIDs: [String: UInt16] = [:]
    /// `zoneIDs` by the names' bytes: a row's zone found without making a
    /// string of it (1M rows per read, a few hundred names): row n of
    /// `zoneNamesMet` is zone `zoneOfNameMet[n]`.
    private var zoneNamesMet = StringTable()
    private var zoneOfNameMet: [UInt16] = []

    /// The rows `rowids` selects (a condition on rowid; all when nil),
    /// in rowid order or `orderBy`'s.
    static func read(
      _ connection: Connection, rowids: String? = nil, orderBy: String? = nil,
      capacity: Int = 0, zones: Zones, timesOnly: Bool
    ) throws(SnapshotError) -> Part {
      let r = try TableReader(
        connection, SnapshotSchema.table("users"), keyColumns: [0], where: rowids,
        orderBy: orderBy, only: timesOnly ? UserRows.timeColumns : nil)
      var part = Part()
      try part.read(r, capacity: capacity, zones: zones, levels: !timesOnly)
      return part
    }

    private mutating func read(_ r: TableReader, capacity: Int, zones: Zones, levels: Bool)
      throws(SnapshotError)
    {
      // The ids are gathered first and hashed in one batched pass at the
      // end (`StringTable(indexing:)`), where a lookup table built row by
      // row waits on a cache miss per id.
      ids.reserveCapacity(strings: capacity, bytes: 0)
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
        if levels { rows.prefs.append(try LevelRow(r, first: 1)) }
        if let bytes = r.uncheckedTextBytes(8), let n = zoneNamesMet.find(bytes) {
          rows.zone.append(zoneOfNameMet[Int(n)])
        } else {
          let zoneName = try r.optionalText(8) ?? "UTC"
          let z: UInt16
          if let known = zoneIDs[zoneName] {
            z = known
          } else {
            do {
              rows.zones.append(try zones.zone(named: zoneName))
            } catch {
              throw r.fail(8, "unknown time zone \(Bounded.quoted(zoneName)) (\(error.reason))")
            }
            z = UInt16(rows.zones.count - 1)
            zoneIDs[zoneName] = z
          }
          if !r.isNull(8), zoneNamesMet.insert(zoneName) != nil { zoneOfNameMet.append(z) }
          rows.zone.append(z)
        }
        switch (try r.optionalMinute(9), try r.optionalMinute(10)) {
        case (nil, nil): rows.dailyDND.append(nil)
        case (let start?, let end?): rows.dailyDND.append((start, end))
        case (nil, _): throw r.fail(9, "dnd_start is NULL but dnd_end is set (both or neither)")
        case (_, nil): throw r.fail(10, "dnd_end is NULL but dnd_start is set (both or neither)")
        }
        rows.quietActions.append(try r.enumerated(12, "drop or defer", QuietAction.init(rawValue:)))
      }
    }

    /// Appends `next`, read after these rows: false when its first id does
    /// not sort after the last here (the whole table is then read again).
    mutating func append(_ next: Part) -> Bool {
      if ids.count > 0 && next.ids.count > 0 {
        let ascends = next.ids.withBytes(0) { first in ids.precedes(ids.count - 1, first) }
        guard ascends else { return false }
      }
      ids.append(contentsOf: next.ids)
      // Zones renumbered as one read in order would have met them.
      var renumbered = [UInt16](repeating: 0, count: next.rows.zones.count)
      for (name, z) in next.zoneIDs.sorted(by: { $0.value < $1.value }) {
        if let known = zoneIDs[name] {
          renumbered[Int(z)] = known
        } else {
          rows.zones.append(next.rows.zones[Int(z)])
          zoneIDs[name] = UInt16(rows.zones.count - 1)
          renumbered[Int(z)] = UInt16(rows.zones.count - 1)
        }
      }
      rows.zone += next.rows.zone.map { renumbered[Int($0)] }
      rows.prefs += next.rows.prefs
      rows.dailyDND += next.rows.dailyDND
      rows.quietActions += next.rows.quietActions
      return true
    }

    /// The rows, their ids indexed (`known`'s table when they are its).
    func finished(known: StringTable?) -> UserRows {
      var rows = rows
      rows.zoneNames = zoneIDs.keys.sorted()
      if let known, ids.sameStrings(as: known.pool) {
        rows.users = known
      } else {
        rows.users = StringTable(indexing: ids)
      }
      return rows
    }
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
