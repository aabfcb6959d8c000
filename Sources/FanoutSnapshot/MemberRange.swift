import CSQLite
import FanoutIndex
import FanoutModel
import FanoutSQLite

/// One range of the members table by channel id, `[lower, upper)` in byte
/// order, read on its own connection so that ranges load in parallel.
struct MemberRange: Sendable {
  var lower: String? = nil
  var upper: String? = nil

  /// The whole table's keys, in order: two ranges, the second read on a
  /// connection of its own (`aside`, taken only then), split near the
  /// middle channel id.
  static func readAll(
    _ connection: Connection, aside: () -> HandedConnection, users: StringTable,
    channelNames: BytePool
  ) throws(SnapshotError) -> [UInt64] {
    // Even small tables split, so most tests take this path.
    // (No rowids — `WITHOUT ROWID` — or no rows: one range.)
    guard let rowids = try? connection.rowidSpan(of: "members"),
      let split = split(connection, rowids)
    else {
      return try MemberRange().read(connection, users: users, channelNames: channelNames)
    }
    let handed = aside()
    let second = MemberRange(lower: split)
    let later = Pending { () -> Result<[UInt64], SnapshotError> in
      Result { () throws(SnapshotError) in
        try second.read(handed.connection, users: users, channelNames: channelNames)
      }
    }
    var keys: [UInt64]
    do {
      keys = try MemberRange(upper: split).read(
        connection, users: users, channelNames: channelNames)
    } catch {
      _ = later.wait()  // the other range's read ends before the refusal
      throw error
    }
    keys += try later.wait().get()
    return keys
  }

  /// A channel id near the middle of the members table in byte order, from
  /// 256 rows sampled at evenly spaced rowids (a few index seeks, where an
  /// exact median would step through half the table). Nil when the table
  /// has no text channel id: one range then. The split only balances the
  /// work; any split gives the same keys.
  private static func split(_ connection: Connection, _ rowids: ClosedRange<Int64>) -> String? {
    var samples: [[UInt8]] = []
    // The span of any two Int64s fits a UInt64; each sample lies between them.
    let span = UInt64(bitPattern: rowids.upperBound &- rowids.lowerBound)
    do {
      let row = try connection.prepare(
        "SELECT channel_id FROM members WHERE rowid >= ? ORDER BY rowid LIMIT 1")
      for i in UInt64(0)..<256 {
        let offset = span / 256 * i + span % 256 * i / 256
        row.bind(1, rowids.lowerBound &+ Int64(bitPattern: offset))
        if try row.step(), row.type(0) == SQLITE_TEXT { samples.append(Array(row.textBytes(0))) }
        row.reset()
      }
    } catch {
      return nil
    }
    guard !samples.isEmpty else { return nil }
    samples.sort { $0.lexicographicallyPrecedes($1) }
    return String(decoding: samples[samples.count / 2], as: UTF8.self)
  }

  /// The range's `channel << 32 | user` keys, in order.
  ///
  /// Rows arrive in channel_id order, as channels were numbered, so the
  /// channel is found by walking alongside the names (an id not met on the
  /// way does not exist); user ids are looked up in batches
  /// (`StringTable.find(batch:into:)`).
  func read(_ connection: Connection, users: StringTable, channelNames: BytePool)
    throws(SnapshotError)
    -> [UInt64]
  {
    var conditions: [String] = []
    var arguments: [String] = []
    // BINARY whatever the declared collation, so ranges agree with the order.
    // NULL ids belong to the first range, where the scan refuses them.
    if let lower {
      conditions.append("channel_id COLLATE BINARY >= ?")
      arguments.append(lower)
    }
    if let upper {
      conditions.append("(channel_id IS NULL OR channel_id COLLATE BINARY < ?)")
      arguments.append(upper)
    }
    let r = try TableReader(
      connection, SnapshotSchema.table("members"), keyColumns: [0, 1],
      where: conditions.isEmpty ? nil : conditions.joined(separator: " AND "), arguments: arguments,
      orderBy: "channel_id COLLATE BINARY, user_id COLLATE BINARY")

    var keys: [UInt64] = []
    var sorted = true
    var cursor = 0
    var batchChannels: [Int32] = []
    var batchUsers = KeyBatch()

    func resolveBatch() throws(SnapshotError) {
      batchUsers.resolve(in: users)
      for k in 0..<batchChannels.count {
        let c = batchChannels[k]
        let u = batchUsers.ids[k]
        guard u >= 0 else {
          let name = batchUsers.name(k)
          throw SnapshotError(
            table: "members",
            key:
              "channel_id=\(Bounded.quoted(channelNames.string(Int(c)))), user_id=\(Bounded.quoted(name))",
            column: "user_id", reason: "unknown user \(Bounded.quoted(name))")
        }
        let key = UInt64(UInt32(c)) << 32 | UInt64(UInt32(u))
        if let last = keys.last {
          if last == key { throw duplicate(key) }
          if last > key { sorted = false }
        }
        keys.append(key)
      }
      batchChannels.removeAll(keepingCapacity: true)
      batchUsers.removeAll()
    }

    func duplicate(_ key: UInt64) -> SnapshotError {
      .duplicatePair(in: "members", key: key, channels: channelNames, users: users)
    }

    do throws(SnapshotError) {
      while try r.next() {
        let name = try r.textBytes(0)
        // Most rows name the channel of the row before.
        if cursor >= channelNames.count || !channelNames.equals(cursor, name) {
          while cursor < channelNames.count && channelNames.precedes(cursor, name) { cursor += 1 }
          guard cursor < channelNames.count && channelNames.equals(cursor, name) else {
            throw r.fail(0, "unknown channel \(Bounded.quoted(try r.text(0)))")
          }
        }
        let user = try r.textBytes(1)
        batchChannels.append(Int32(cursor))
        batchUsers.append(user)
        if batchUsers.isFull { try resolveBatch() }
      }
    } catch {
      try resolveBatch()  // an earlier row's unknown user is the error a scan meets first
      throw error
    }
    try resolveBatch()
    if !sorted {
      keys.sort()
      for i in keys.indices.dropFirst() where keys[i] == keys[i - 1] { throw duplicate(keys[i]) }
    }
    return keys
  }
}
