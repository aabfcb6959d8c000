import FanoutModel

/// Contract v2's per-pair lists, built so that a message looks each up once
/// and then walks it alongside the channel's members (both ascend by user
/// row): who muted a sender (`user_mutes`), and who set a chat level for a
/// thread of a channel (`thread_prefs`).

/// `user_mutes` turned around: per user, the users who muted them.
public struct MutedBy: Sendable {
  /// CSR: user row → `muters` rows, ascending.
  package let offsets: Column<Int32>
  package let muters: Column<Int32>

  /// Builds from (user, muted user) rows, each pair at most once.
  package init(users: Int, mutes: [(user: Int32, muted: Int32)]) {
    var offsets = [Int32](repeating: 0, count: users + 1)
    for mute in mutes { offsets[Int(mute.muted) + 1] += 1 }
    for u in 0..<users { offsets[u + 1] += offsets[u] }
    var muters = [Int32](repeating: 0, count: mutes.count)
    var next = offsets
    for mute in mutes.sorted(by: { ($0.muted, $0.user) < ($1.muted, $1.user) }) {
      muters[Int(next[Int(mute.muted)])] = mute.user
      next[Int(mute.muted)] += 1
    }
    self.offsets = Column(offsets)
    self.muters = Column(muters)
  }

  /// A compiled index's lists, as stored.
  package init(offsets: Column<Int32>, muters: Column<Int32>) {
    self.offsets = offsets
    self.muters = muters
  }
}

/// `thread_prefs`: per (channel, thread) the users with a chat level there.
public struct ThreadPrefs: Sendable {
  /// Every thread id that a row names, to resolve a message's thread once.
  public let threads: StringTable
  /// `channel << 32 | thread`, ascending, one per (channel, thread).
  package let keys: Column<UInt64>
  /// CSR: key → rows of `users` / `levels`, users ascending.
  package let starts: Column<Int32>
  package let users: Column<Int32>
  package let levels: Column<Level>

  /// Builds from validated rows, each (user, channel, thread) at most once.
  package init(
    threads: StringTable, rows: [(user: Int32, channel: Int32, thread: Int32, level: Level)]
  ) {
    self.threads = threads
    let sorted = rows.sorted { ($0.channel, $0.thread, $0.user) < ($1.channel, $1.thread, $1.user) }
    var keys: [UInt64] = []
    var starts: [Int32] = []
    for (i, row) in sorted.enumerated() {
      let key = UInt64(UInt32(row.channel)) << 32 | UInt64(UInt32(row.thread))
      if keys.last != key {
        keys.append(key)
        starts.append(Int32(i))
      }
    }
    starts.append(Int32(sorted.count))
    self.keys = Column(keys)
    self.starts = Column(starts)
    users = Column(sorted.map(\.user))
    levels = Column(sorted.map(\.level))
  }

  /// A compiled index's lists, as stored.
  package init(
    threads: StringTable, keys: Column<UInt64>, starts: Column<Int32>, users: Column<Int32>,
    levels: Column<Level>
  ) {
    self.threads = threads
    self.keys = keys
    self.starts = starts
    self.users = users
    self.levels = levels
  }

  /// The thread row of a message's thread id, or -1 when no row names it.
  public func thread(named id: UnsafeRawBufferPointer) -> Int32 {
    threads.count == 0 ? -1 : threads.find(id) ?? -1
  }

  /// The rows of `users` / `levels` for `thread` (a row of `threads`, or -1)
  /// in `channel`.
  public func range(channel: Int, thread: Int32) -> Range<Int> {
    guard thread >= 0 else { return 0..<0 }
    let key = UInt64(UInt32(channel)) << 32 | UInt64(UInt32(thread))
    var lo = 0
    var hi = keys.count
    while lo < hi {
      let mid = (lo + hi) / 2
      if keys[mid] < key { lo = mid + 1 } else { hi = mid }
    }
    guard lo < keys.count, keys[lo] == key else { return 0..<0 }
    return Int(starts[lo])..<Int(starts[lo + 1])
  }

}
