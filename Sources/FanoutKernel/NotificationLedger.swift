import FanoutIndex
import FanoutModel

/// The notification group a delivered pair's notification joins (contract
/// v3, section 6.3): by trigger, pinned messages with mentions.
enum NotificationGroupType: UInt8, CaseIterable {
  case messages = 0
  case mentions = 1
  case calls = 2

  @inline(__always)
  init(_ trigger: Trigger) {
    switch trigger {
    case .message: self = .messages
    case .mention, .pinned: self = .mentions
    case .call: self = .calls
    }
  }
}

/// Contract v3's memory (section 6.3): per recipient, the notifications
/// still unread, the groups used so far with their visible notifications,
/// and the last notification and group ids given out. A user's state
/// depends only on the lines that reach that user, in input order, so the
/// ledger is cut into partitions by user, each walked by one thread: the
/// ids, badges, hides and removals are the same whatever the number of
/// partitions.
///
/// Memory grows with the unread notifications and the groups used (a
/// group's id is kept for the run, as ids are never reused), not with users
/// × channels: see `NotificationState`.
public final class NotificationLedger: @unchecked Sendable {
  public let caps: AppSettings.NotificationGroups
  let partitions: [NotificationPartition]

  public init(caps: AppSettings.NotificationGroups, partitions: Int, users: Int) {
    self.caps = caps
    let count = max(1, partitions)
    self.partitions = (0..<count).map { _ in
      NotificationPartition(caps: caps, stride: count, users: users)
    }
  }

  @inline(__always)
  func partition(ofUser u: Int32) -> Int { Int(u) % partitions.count }

  /// Notifications hidden, removed and cancelled so far, and unread now.
  public var counters: NotificationCounters {
    partitions.reduce(into: NotificationCounters()) { $0.add($1.state.counters) }
  }

  /// The ledger for `index`, which replaces `previous` (a stream's snapshot
  /// reload): each user's state moves to the new index's row of the same
  /// user id, each group and notification to the new row of its channel
  /// id. A user the new snapshot lacks is dropped; so are the unread
  /// notifications of channels it lacks (nothing can read them any more;
  /// their groups keep their ids).
  /// The new snapshot's caps apply from then on (to what is added after).
  public func rekeyed(from previous: Index, to index: Index, partitions count: Int)
    -> NotificationLedger
  {
    let ledger = NotificationLedger(
      caps: index.settings.notificationGroups ?? caps, partitions: count,
      users: index.users.count)
    var channelRow = [Int32](repeating: -1, count: previous.channels.count)
    for c in 0..<previous.channels.count {
      channelRow[c] = index.channels.find(previous.channels[c]) ?? -1
    }
    for part in partitions {
      part.state.forEachUser { oldUser, exported in
        guard let user = index.users.find(previous.users[Int(oldUser)]) else { return }
        ledger.partitions[ledger.partition(ofUser: user)].state.adopt(
          user: user, exported.movedToChannels(channelRow))
      }
      ledger.partitions[0].state.counters.add(part.state.counters.runTotals)
    }
    // What is unread is counted again from the states kept.
    for part in ledger.partitions { part.state.recountUnread() }
    return ledger
  }
}

/// The run's notification counts (summary.json's `notifications`).
public struct NotificationCounters: Sendable, Equatable {
  public var hidden = 0
  public var removed = 0
  public var cancelled = 0
  /// Unread at the end (hidden ones included).
  public var unread = 0

  public init() {}

  public mutating func add(_ other: NotificationCounters) {
    hidden += other.hidden
    removed += other.removed
    cancelled += other.cancelled
    unread += other.unread
  }

  /// The counts over the run, without the unread count of the moment.
  var runTotals: NotificationCounters {
    var totals = self
    totals.unread = 0
    return totals
  }
}

/// One partition of a `NotificationLedger`, walked by one thread at a time.
final class NotificationPartition: @unchecked Sendable {
  var state: NotificationState

  init(caps: AppSettings.NotificationGroups, stride: Int, users: Int) {
    state = NotificationState(caps: caps, stride: stride, users: users)
  }

  /// Runs `body` on the state, held for its whole run (one access, not one
  /// per notification).
  func walk<R>(_ body: (inout NotificationState) -> R) -> R { body(&state) }
}

/// One partition's users, groups and notifications in flat pools — arrays
/// of plain records (one cache line or less each), linked by index, no
/// allocation per user or per notification once the pools have grown: each
/// group's unread notifications in id order (singly linked: a read walks
/// only its channel's), each group's visible ones in id order (doubly
/// linked, so that hiding or removing one is O(1)), a user's groups
/// (singly linked), and a hash table from (user, channel, type) to group.
/// Removed notifications' places are reused.
///
/// Memory: 48 bytes per notification place (the most unread at once), 56
/// per group used plus 12 per table slot (at most half full), and 48 per
/// user row / partitions.
struct NotificationState {
  let caps: AppSettings.NotificationGroups
  let stride: Int
  var counters = NotificationCounters()

  /// A user with any notification: the last ids given out, the unread
  /// notifications (a list in id order, and how many), the groups (all,
  /// and those with a visible notification).
  struct User {
    var lastNotification: Int64 = 0
    var unreadCount: Int64 = 0
    var row: Int32
    var lastGroup: Int32 = 0
    var firstGroup: Int32 = -1
    var visibleGroups: Int32 = 0
    var firstVisibleGroup: Int32 = -1
  }

  /// A group used: its id (`ordinal`), key and user, its visible
  /// notifications (a list in id order, how many, the newest's id), and
  /// its places in the user's lists.
  struct Group {
    var newestVisible: Int64 = 0
    var ordinal: Int32
    var channel: Int32
    var record: Int32
    var nextOfUser: Int32
    var nextVisibleGroup: Int32 = -1
    var previousVisibleGroup: Int32 = -1
    var visibleHead: Int32 = -1
    var visibleTail: Int32 = -1
    var visibleCount: Int32 = 0
    /// The group's unread notifications (visible or hidden), in id order.
    var unreadHead: Int32 = -1
    var unreadTail: Int32 = -1
    var type: UInt8
  }

  /// An unread notification (or a free place).
  struct Note {
    var id: Int64
    var ts: Int64
    var due: Int64
    var group: Int32
    var nextUnread: Int32 = -1
    var nextVisible: Int32 = -1
    var previousVisible: Int32 = -1
    var visible = false
  }

  /// By user row / stride (the record of user row u is u / stride): one
  /// record per user of the partition, `row` −1 until the user's first
  /// notification. A user's record is found without a lookup.
  private var users: [User]
  private var groups: [Group] = []
  private var notes: [Note] = []
  /// Places of removed notifications, linked through `nextUnread`.
  private var freeNote: Int32 = -1

  // (record, channel, type) → group.
  private var tableKeys = [UInt64](repeating: .max, count: 1024)
  private var tableGroups = [Int32](repeating: -1, count: 1024)
  private var tableCount = 0

  init(caps: AppSettings.NotificationGroups, stride: Int, users: Int) {
    self.caps = caps
    self.stride = stride
    self.users = [User](repeating: User(row: -1), count: users / stride &+ 1)
  }

  // MARK: The rules

  /// The notification of a pair delivered to `u` in `channel`: its group
  /// and id, the badge, and the ids it hid (appended to `hides`, ascending).
  mutating func add(
    user u: Int32, channel: Int32, trigger: Trigger, ts: Int64, deliverAt: Int64,
    hides: inout [Int64]
  ) -> (group: Int64, id: Int64, badge: Int64) {
    let r = record(of: u)
    users[r].lastNotification &+= 1
    let id = users[r].lastNotification
    let g = group(record: r, channel: channel, type: NotificationGroupType(trigger).rawValue)
    let n = newNote(id: id, group: g, ts: ts, due: deliverAt)
    // Unread, at the user's tail.
    appendUnread(n, group: g)
    users[r].unreadCount &+= 1
    // Visible, at the group's tail.
    linkVisible(n, group: g)
    let firstHidden = hides.count
    // The size cap: the group's oldest visible notifications.
    if let size = caps.sizeMax {
      while Int64(groups[g].visibleCount) > size { hides.append(hide(groups[g].visibleHead)) }
    }
    // The count cap: the other group whose newest visible notification is oldest.
    if let count = caps.countMax {
      while Int64(users[r].visibleGroups) > count {
        var oldest: Int32 = -1
        var oldestNewest = Int64.max
        var k = users[r].firstVisibleGroup
        while k >= 0 {
          if Int(k) != g {
            let newest = groups[Int(k)].newestVisible
            if newest < oldestNewest {
              oldest = k
              oldestNewest = newest
            }
          }
          k = groups[Int(k)].nextVisibleGroup
        }
        guard oldest >= 0 else { break }
        while groups[Int(oldest)].visibleCount > 0 {
          hides.append(hide(groups[Int(oldest)].visibleHead))
        }
      }
    }
    let hidden = hides.count &- firstHidden
    if hidden > 1 { hides[firstHidden...].sort() }
    counters.hidden &+= hidden
    counters.unread &+= 1
    return (Int64(groups[g].ordinal), id, users[r].unreadCount)
  }

  /// A read by `u` of `channel` up to `ts`: removes the user's unread
  /// notifications of that channel whose message's ts is at most `ts`
  /// (appended to `removed`, ascending), those due later also cancelled
  /// (appended to `cancelled`); returns the unread count after it.
  mutating func read(
    user u: Int32, channel: Int32, at ts: Int64, removed: inout [Int64],
    cancelled: inout [Int64]
  ) -> Int64 {
    let k = Int(u) / stride
    guard k < users.count, users[k].row >= 0 else { return 0 }
    let r = k
    let first = removed.count
    let firstCancelled = cancelled.count
    // Only the channel's groups: a read costs that channel's unread notifications.
    for type in NotificationGroupType.allCases {
      guard let g = existingGroup(record: r, channel: channel, type: type.rawValue) else {
        continue
      }
      var previous: Int32 = -1
      var n = groups[g].unreadHead
      while n >= 0 {
        let note = Int(n)
        let next = notes[note].nextUnread
        if notes[note].ts <= ts {
          removed.append(notes[note].id)
          if notes[note].due > ts { cancelled.append(notes[note].id) }
          if notes[note].visible { unlinkVisible(n) }
          if previous < 0 {
            groups[g].unreadHead = next
          } else {
            notes[Int(previous)].nextUnread = next
          }
          if groups[g].unreadTail == n { groups[g].unreadTail = previous }
          notes[note].nextUnread = freeNote
          freeNote = n
        } else {
          previous = n
        }
        n = next
      }
    }
    // Ascending across the channel's groups.
    if removed.count &- first > 1 { removed[first...].sort() }
    if cancelled.count &- firstCancelled > 1 { cancelled[firstCancelled...].sort() }
    let count = removed.count &- first
    users[r].unreadCount &-= Int64(count)
    counters.removed &+= count
    counters.cancelled &+= cancelled.count &- firstCancelled
    counters.unread &-= count
    return users[r].unreadCount
  }

  // MARK: Pools

  @inline(__always)
  private mutating func record(of u: Int32) -> Int {
    let k = Int(u) / stride
    if k >= users.count {
      users += [User](repeating: User(row: -1), count: k &+ 1 &- users.count)
    }
    if users[k].row < 0 { users[k].row = u }
    return k
  }

  /// The group (record, channel, type), if the user has used it.
  @inline(__always)
  private func existingGroup(record r: Int, channel: Int32, type: UInt8) -> Int? {
    let slot = tableSlot(Self.groupKey(record: r, channel: channel, type: type))
    return tableKeys[slot] == .max ? nil : Int(tableGroups[slot])
  }

  /// A group's key in the table: (record, channel, type).
  @inline(__always)
  private static func groupKey(record r: Int, channel: Int32, type: UInt8) -> UInt64 {
    UInt64(UInt32(r)) << 32 | UInt64(UInt32(bitPattern: channel)) << 2 | UInt64(type)
  }

  /// The table slot holding `key`, or the empty slot where it belongs
  /// (linear probing from its hash).
  @inline(__always)
  private func tableSlot(_ key: UInt64) -> Int {
    let mask = tableKeys.count &- 1
    var slot = Int(truncatingIfNeeded: (key &* 0x9E37_79B9_7F4A_7C15) >> 40) & mask
    while tableKeys[slot] != .max && tableKeys[slot] != key { slot = (slot &+ 1) & mask }
    return slot
  }

  /// Appends notification `n` to group `g`'s unread list.
  @inline(__always)
  private mutating func appendUnread(_ n: Int32, group g: Int) {
    if groups[g].unreadTail < 0 {
      groups[g].unreadHead = n
    } else {
      notes[Int(groups[g].unreadTail)].nextUnread = n
    }
    groups[g].unreadTail = n
  }

  /// The group (record, channel, type), made on first use with the user's
  /// next group id.
  @inline(__always)
  private mutating func group(record r: Int, channel: Int32, type: UInt8) -> Int {
    let key = Self.groupKey(record: r, channel: channel, type: type)
    if 2 * (tableCount &+ 1) > tableKeys.count { growTable() }
    let slot = tableSlot(key)
    if tableKeys[slot] == key { return Int(tableGroups[slot]) }
    let g = newGroup(record: r, channel: channel, type: type)
    tableKeys[slot] = key
    tableGroups[slot] = Int32(g)
    tableCount &+= 1
    return g
  }

  private mutating func newGroup(record r: Int, channel: Int32, type: UInt8) -> Int {
    users[r].lastGroup &+= 1
    groups.append(
      Group(
        ordinal: users[r].lastGroup, channel: channel, record: Int32(r),
        nextOfUser: users[r].firstGroup, type: type))
    users[r].firstGroup = Int32(groups.count &- 1)
    return groups.count &- 1
  }

  private mutating func growTable() {
    let keys = tableKeys
    let groups = tableGroups
    tableKeys = [UInt64](repeating: .max, count: keys.count * 2)
    tableGroups = [Int32](repeating: -1, count: keys.count * 2)
    for i in keys.indices where keys[i] != .max {
      let slot = tableSlot(keys[i])
      tableKeys[slot] = keys[i]
      tableGroups[slot] = groups[i]
    }
  }

  @inline(__always)
  private mutating func newNote(id: Int64, group g: Int, ts: Int64, due: Int64) -> Int32 {
    let note = Note(id: id, ts: ts, due: due, group: Int32(g))
    if freeNote >= 0 {
      let n = freeNote
      freeNote = notes[Int(n)].nextUnread
      notes[Int(n)] = note
      return n
    }
    notes.append(note)
    return Int32(notes.count &- 1)
  }

  @inline(__always)
  private mutating func linkVisible(_ n: Int32, group g: Int) {
    let note = Int(n)
    if groups[g].visibleCount == 0 {
      // The group shows again: into its user's list of visible groups.
      let r = Int(groups[g].record)
      users[r].visibleGroups &+= 1
      groups[g].nextVisibleGroup = users[r].firstVisibleGroup
      groups[g].previousVisibleGroup = -1
      if users[r].firstVisibleGroup >= 0 {
        groups[Int(users[r].firstVisibleGroup)].previousVisibleGroup = Int32(g)
      }
      users[r].firstVisibleGroup = Int32(g)
    }
    notes[note].visible = true
    notes[note].previousVisible = groups[g].visibleTail
    notes[note].nextVisible = -1
    if groups[g].visibleTail < 0 {
      groups[g].visibleHead = n
    } else {
      notes[Int(groups[g].visibleTail)].nextVisible = n
    }
    groups[g].visibleTail = n
    groups[g].newestVisible = notes[note].id
    groups[g].visibleCount &+= 1
  }

  @inline(__always)
  private mutating func unlinkVisible(_ n: Int32) {
    let note = Int(n)
    let g = Int(notes[note].group)
    let before = notes[note].previousVisible
    let after = notes[note].nextVisible
    if before < 0 { groups[g].visibleHead = after } else { notes[Int(before)].nextVisible = after }
    if after < 0 {
      groups[g].visibleTail = before
      if before >= 0 { groups[g].newestVisible = notes[Int(before)].id }
    } else {
      notes[Int(after)].previousVisible = before
    }
    notes[note].visible = false
    groups[g].visibleCount &-= 1
    if groups[g].visibleCount == 0 {
      // Out of its user's list of visible groups.
      let r = Int(groups[g].record)
      users[r].visibleGroups &-= 1
      let before = groups[g].previousVisibleGroup
      let after = groups[g].nextVisibleGroup
      if before < 0 {
        users[r].firstVisibleGroup = after
      } else {
        groups[Int(before)].nextVisibleGroup = after
      }
      if after >= 0 { groups[Int(after)].previousVisibleGroup = before }
    }
  }

  /// Hides notification `n` (visible); returns its id.
  @inline(__always)
  private mutating func hide(_ n: Int32) -> Int64 {
    unlinkVisible(n)
    return notes[Int(n)].id
  }

  // MARK: Moving states (a stream's reload)

  /// One user's state as values.
  struct Exported {
    var lastNotification: Int64
    /// In order of first use: the group with id k + 1 is `groups[k]`.
    var groups: [(channel: Int32, type: UInt8)]
    /// Unread notifications in id order: id, group id, ts, due, visible.
    var unread: [(id: Int64, group: Int32, ts: Int64, due: Int64, visible: Bool)]

    /// The state with channel rows renumbered by `rows` (−1: a channel that
    /// is gone; its group keeps its id, its unread notifications go).
    func movedToChannels(_ rows: [Int32]) -> Exported {
      var moved = self
      moved.groups = groups.map { ($0.channel < 0 ? -1 : rows[Int($0.channel)], $0.type) }
      moved.unread = unread.filter { moved.groups[Int($0.group) - 1].channel >= 0 }
      return moved
    }
  }

  /// Calls `body` with each user row and its state.
  func forEachUser(_ body: (Int32, Exported) -> Void) {
    for r in users.indices where users[r].row >= 0 {
      var used = [(channel: Int32, type: UInt8)](
        repeating: (-1, 0), count: Int(users[r].lastGroup))
      var g = users[r].firstGroup
      while g >= 0 {
        let group = groups[Int(g)]
        used[Int(group.ordinal) - 1] = (group.channel, group.type)
        g = group.nextOfUser
      }
      var unread: [(id: Int64, group: Int32, ts: Int64, due: Int64, visible: Bool)] = []
      g = users[r].firstGroup
      while g >= 0 {
        var n = groups[Int(g)].unreadHead
        while n >= 0 {
          let note = notes[Int(n)]
          unread.append((note.id, groups[Int(g)].ordinal, note.ts, note.due, note.visible))
          n = note.nextUnread
        }
        g = groups[Int(g)].nextOfUser
      }
      unread.sort { $0.id < $1.id }
      body(
        users[r].row,
        Exported(lastNotification: users[r].lastNotification, groups: used, unread: unread))
    }
  }

  /// Takes `exported` as user `u`'s state (`u` must have none here).
  mutating func adopt(user u: Int32, _ exported: Exported) {
    let r = record(of: u)
    users[r].lastNotification = exported.lastNotification
    var made: [Int] = []
    for (channel, type) in exported.groups {
      // A channel that is gone keeps its group's id, out of the table.
      made.append(
        channel >= 0
          ? group(record: r, channel: channel, type: type)
          : newGroup(record: r, channel: -1, type: type))
    }
    for note in exported.unread {
      let g = made[Int(note.group) - 1]
      let n = newNote(id: note.id, group: g, ts: note.ts, due: note.due)
      appendUnread(n, group: g)
      users[r].unreadCount &+= 1
      if note.visible { linkVisible(n, group: g) }
    }
  }

  /// Sets the unread count from the states held.
  mutating func recountUnread() {
    counters.unread = Int(users.reduce(0) { $0 &+ $1.unreadCount })
  }
}
