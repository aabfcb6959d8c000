import FanoutIndex
import FanoutModel
import FanoutSQLite

/// `channels`: ids in byte order, kind, and (v2) the declared member count.
struct ChannelRows: Sendable {
  /// Channel ids in byte order; hashed into a `StringTable` on another core
  /// while members are read (members need only the names: they arrive in
  /// the same order).
  var names = BytePool()
  var scopes: [Scope] = []
  /// Per channel: member_count, -1 where NULL; empty when the snapshot
  /// has no such column (v1), so that it costs nothing there.
  var memberCounts: [Int64] = []

  static func read(_ connection: Connection) throws(SnapshotError) -> ChannelRows {
    try connection.readInIDOrder("channel_id") { orderBy throws(SnapshotError) in
      try read(connection, orderBy: orderBy)
    }
  }

  private static func read(_ connection: Connection, orderBy: String?) throws(SnapshotError)
    -> ChannelRows
  {
    let r = try connection.reader("channels", key: [0], orderBy: orderBy)
    var rows = ChannelRows()
    while try r.next() {
      let id = try r.textBytes(0)
      if let last = rows.names.count > 0 ? rows.names.count - 1 : nil {
        if rows.names.equals(last, id) { throw r.fail(0, "duplicate key") }
        guard rows.names.precedes(last, id) else {
          // In rowid order this sends the read to id order (`readInIDOrder`),
          // where it cannot happen: the text is UTF-8 (`checkEncoding`).
          throw r.fail(0, "channel ids are not in byte order")
        }
      }
      rows.names.append(id)
      rows.scopes.append(try r.required(1, "direct, group or broadcast", Scope.init(name:)))
      if r.hasColumn(2) {
        // Below the channel's rows in members, which are never negative.
        let declared = try r.optionalInt(2)
        if let declared, declared < 0 { throw r.fail(2, "member_count \(declared) is negative") }
        rows.memberCounts.append(declared ?? -1)
      }
    }
    return rows
  }

  /// Refuses a member_count below the channel's rows in members (their
  /// `channel << 32 | user` keys): checked once the members are read, so
  /// after any error in that table.
  func checkMemberCounts(memberKeys: [UInt64]) throws(SnapshotError) {
    guard !memberCounts.isEmpty else { return }
    var rows = [Int32](repeating: 0, count: memberCounts.count)
    for key in memberKeys { rows[Int(key >> 32)] += 1 }
    for c in memberCounts.indices {
      let declared = memberCounts[c]
      if declared >= 0 && declared < rows[c] {
        throw SnapshotError(
          table: "channels", key: "channel_id=\(Bounded.quoted(names.string(c)))",
          column: "member_count",
          reason: "member_count \(declared) is below the channel's \(rows[c]) rows in members")
      }
    }
  }
}

/// `scope_prefs`: a user's levels per channel kind.
struct ScopePrefRows: Sendable {
  /// `user * 3 + scope` → row of `prefs`, or -1.
  var rowOf: [Int32] = []
  var prefs: [LevelRow] = []

  static func read(_ connection: Connection, users: StringTable) throws(SnapshotError)
    -> ScopePrefRows
  {
    var rows = ScopePrefRows(rowOf: Array(repeating: -1, count: users.count * 3))
    let r = try connection.reader("scope_prefs", key: [0, 1])
    while try r.next() {
      let u = try r.user(0, in: users)
      let scope = try r.required(1, "direct, group or broadcast", Scope.init(name:))
      let slot = Int(u) * 3 + Int(scope.rawValue)
      guard rows.rowOf[slot] < 0 else { throw r.fail(nil, "duplicate key") }
      rows.rowOf[slot] = Int32(rows.prefs.count)
      rows.prefs.append(try LevelRow(r, first: 2))
    }
    return rows
  }
}

/// `channel_prefs`: a user's levels in one channel.
struct ChannelPrefRows: Sendable {
  /// `channel << 32 | user` → row of `prefs`, sorted by key.
  var keys: [(key: UInt64, row: Int32)] = []
  var prefs: [LevelRow] = []

  /// Ids are looked up in batches (`KeyBatch`); the error reported is still
  /// the one a row-by-row scan meets first.
  static func read(
    _ connection: Connection, users: StringTable, channels: StringTable, channelNames: BytePool
  ) throws(SnapshotError) -> ChannelPrefRows {
    let r = try connection.reader("channel_prefs", key: [0, 1])
    var rows = ChannelPrefRows()
    var userKeys = KeyBatch()
    var channelKeys = KeyBatch()
    var awaitingIDs: [LevelRow] = []

    func resolveIDs() throws(SnapshotError) {
      userKeys.resolve(in: users)
      channelKeys.resolve(in: channels)
      for k in 0..<userKeys.count {
        let (u, c) = (userKeys.ids[k], k < channelKeys.count ? channelKeys.ids[k] : 0)
        guard u >= 0, c >= 0 else {
          // A row whose later column failed is the reader's current row.
          let key =
            k < awaitingIDs.count
            ? "user_id=\(Bounded.quoted(userKeys.name(k))), channel_id=\(Bounded.quoted(channelKeys.name(k)))"
            : r.rowKey
          throw SnapshotError(
            table: "channel_prefs", key: key, column: u < 0 ? "user_id" : "channel_id",
            reason: u < 0
              ? "unknown user \(Bounded.quoted(userKeys.name(k)))"
              : "unknown channel \(Bounded.quoted(channelKeys.name(k)))")
        }
        guard k < awaitingIDs.count else { return }  // the failing row: its own error follows
        rows.keys.append((UInt64(UInt32(c)) << 32 | UInt64(UInt32(u)), Int32(rows.prefs.count)))
        rows.prefs.append(awaitingIDs[k])
      }
      userKeys.removeAll()
      channelKeys.removeAll()
      awaitingIDs.removeAll(keepingCapacity: true)
    }

    do throws(SnapshotError) {
      while try r.next() {
        userKeys.append(try r.textBytes(0))
        channelKeys.append(try r.textBytes(1))
        awaitingIDs.append(try LevelRow(r, first: 2, acceptDefault: true))
        if userKeys.isFull { try resolveIDs() }
      }
    } catch {
      try resolveIDs()  // an earlier row's unknown id is the error a row-by-row scan meets first
      throw error
    }
    try resolveIDs()
    rows.keys.sort { $0.key < $1.key }
    for i in rows.keys.indices.dropFirst() where rows.keys[i].key == rows.keys[i - 1].key {
      throw .duplicatePair(
        in: "channel_prefs", key: rows.keys[i].key, channels: channelNames, users: users)
    }
    return rows
  }
}
