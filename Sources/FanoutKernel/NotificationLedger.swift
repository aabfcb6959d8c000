import FanoutIndex
import FanoutModel

/// The notification group a delivered pair's notification joins (contract
/// v3, section 6.3): by trigger, pinned messages with mentions.
enum NotificationGroupType: UInt8 {
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
/// × channels.
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
    partitions.reduce(into: NotificationCounters()) { $0.add($1.counters) }
  }

  /// The ledger for `index`, which replaces `previous` (a stream's snapshot
  /// reload): each user's state moves to the new index's row of the same
  /// user id, each notification and group to the new row of its channel
  /// id. A user the new snapshot lacks is dropped; so are the unread
  /// notifications of channels it lacks (nothing can read them any more).
  public func rekeyed(from previous: Index, to index: Index, partitions count: Int)
    -> NotificationLedger
  {
    let ledger = NotificationLedger(caps: caps, partitions: count, users: index.users.count)
    var channelRow = [Int32](repeating: -1, count: previous.channels.count)
    for c in 0..<previous.channels.count {
      channelRow[c] = index.channels.find(previous.channels[c]) ?? -1
    }
    for part in partitions {
      part.forEachUser { oldUser, notes in
        guard let user = index.users.find(previous.users[Int(oldUser)]) else { return }
        let moved = notes.movedToChannels(channelRow)
        ledger.partitions[ledger.partition(ofUser: user)].adopt(user: user, moved)
      }
      ledger.partitions[0].counters.add(part.counters.runTotals)
    }
    // What was unread is counted again from the states kept.
    for part in ledger.partitions { part.recountUnread() }
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

/// One user's notification state.
struct UserNotes {
  /// One notification not yet read (hidden or visible), by ascending id.
  struct Note {
    var id: Int64
    /// The group's position in `groups` (its id − 1).
    var group: Int32
    var channel: Int32
    /// The message's ts and the pair's delivery time.
    var ts: Int64
    var deliverAt: Int64
    var visible: Bool
  }

  /// A group used in the run: its key, and its visible notifications'
  /// ids, ascending, from `head`.
  struct Group {
    var channel: Int32
    var type: UInt8
    var visible: [Int64] = []
    var head = 0

    var visibleCount: Int { visible.count &- head }
  }

  var lastNotification: Int64 = 0
  var unread: [Note] = []
  /// In order of first use: group id k + 1 is `groups[k]`.
  var groups: [Group] = []
  /// Group positions ordered by (channel, type), for finding a pair's group.
  var groupOrder: [Int32] = []
  /// Groups with at least one visible notification.
  var visibleGroups = 0

  /// The position of group (channel, type), created if new.
  mutating func group(channel: Int32, type: UInt8) -> Int {
    var lo = 0
    var hi = groupOrder.count
    while lo < hi {
      let mid = (lo &+ hi) &>> 1
      let g = groups[Int(groupOrder[mid])]
      if g.channel < channel || (g.channel == channel && g.type < type) {
        lo = mid &+ 1
      } else {
        hi = mid
      }
    }
    if lo < groupOrder.count {
      let g = Int(groupOrder[lo])
      if groups[g].channel == channel && groups[g].type == type { return g }
    }
    groups.append(Group(channel: channel, type: type))
    groupOrder.insert(Int32(groups.count &- 1), at: lo)
    return groups.count &- 1
  }

  /// The position of notification `id` in `unread`.
  func position(of id: Int64) -> Int? {
    var lo = 0
    var hi = unread.count
    while lo < hi {
      let mid = (lo &+ hi) &>> 1
      if unread[mid].id < id { lo = mid &+ 1 } else { hi = mid }
    }
    return lo < unread.count && unread[lo].id == id ? lo : nil
  }

  /// Hides the oldest visible notification of group `g`; returns its id.
  mutating func hideOldest(of g: Int) -> Int64 {
    let id = groups[g].visible[groups[g].head]
    groups[g].head &+= 1
    if groups[g].head == groups[g].visible.count {
      groups[g].visible.removeAll(keepingCapacity: true)
      groups[g].head = 0
      visibleGroups &-= 1
    } else if groups[g].head >= 32 && groups[g].head &* 2 >= groups[g].visible.count {
      groups[g].visible.removeFirst(groups[g].head)
      groups[g].head = 0
    }
    if let k = position(of: id) { unread[k].visible = false }
    return id
  }

  /// The state with channel rows renumbered by `rows` (old row → new, or
  /// −1 for a channel that is gone: its unread notifications are dropped,
  /// its groups kept for their ids).
  func movedToChannels(_ rows: [Int32]) -> UserNotes {
    var moved = self
    for g in moved.groups.indices {
      let old = Int(moved.groups[g].channel)
      moved.groups[g].channel = rows[old]
    }
    moved.unread = unread.compactMap { note in
      var note = note
      note.channel = rows[Int(note.channel)]
      return note.channel < 0 ? nil : note
    }
    for g in moved.groups.indices where moved.groups[g].channel < 0 {
      moved.groups[g].visible = []
      moved.groups[g].head = 0
    }
    moved.visibleGroups = moved.groups.count { $0.visibleCount > 0 }
    moved.groupOrder = moved.groupOrder.sorted {
      let a = moved.groups[Int($0)]
      let b = moved.groups[Int($1)]
      return (a.channel, a.type, $0) < (b.channel, b.type, $1)
    }
    return moved
  }
}

/// One partition of a `NotificationLedger`: the users whose row is
/// `p` modulo the partition count, each found through a flat table.
final class NotificationPartition: @unchecked Sendable {
  let caps: AppSettings.NotificationGroups
  private let stride: Int
  /// By user row / stride: the user's position in `users`, or −1.
  private var slots: [Int32]
  private var users: [UserNotes] = []
  private var userRows: [Int32] = []
  var counters = NotificationCounters()

  init(caps: AppSettings.NotificationGroups, stride: Int, users: Int) {
    self.caps = caps
    self.stride = stride
    slots = [Int32](repeating: -1, count: users / stride &+ 1)
  }

  @inline(__always)
  private func slot(of u: Int32, creating: Bool) -> Int? {
    let k = Int(u) / stride
    if k >= slots.count {
      guard creating else { return nil }
      slots += [Int32](repeating: -1, count: k &+ 1 &- slots.count)
    }
    if slots[k] >= 0 { return Int(slots[k]) }
    guard creating else { return nil }
    users.append(UserNotes())
    userRows.append(u)
    slots[k] = Int32(users.count &- 1)
    return users.count &- 1
  }

  /// The notification of a pair delivered to `u`: its group and id, the
  /// badge, and the ids it hid (appended to `hides`, ascending).
  func add(
    user u: Int32, channel: Int32, trigger: Trigger, ts: Int64, deliverAt: Int64,
    hides: inout [Int64]
  ) -> (group: Int64, id: Int64, badge: Int64) {
    let s = slot(of: u, creating: true)!
    return users.withUnsafeMutableBufferPointer { all in
      add(&all[s], channel: channel, trigger: trigger, ts: ts, deliverAt: deliverAt, &hides)
    }
  }

  private func add(
    _ user: inout UserNotes, channel: Int32, trigger: Trigger, ts: Int64, deliverAt: Int64,
    _ hides: inout [Int64]
  ) -> (group: Int64, id: Int64, badge: Int64) {
    user.lastNotification &+= 1
    let id = user.lastNotification
    let g = user.group(channel: channel, type: NotificationGroupType(trigger).rawValue)
    if user.groups[g].visibleCount == 0 { user.visibleGroups &+= 1 }
    user.groups[g].visible.append(id)
    user.unread.append(
      .init(id: id, group: Int32(g), channel: channel, ts: ts, deliverAt: deliverAt, visible: true))
    let firstHidden = hides.count
    // The size cap: the group's oldest visible notifications.
    if let size = caps.sizeMax {
      while Int64(user.groups[g].visibleCount) > size { hides.append(user.hideOldest(of: g)) }
    }
    // The count cap: the other group whose newest visible notification is oldest.
    if let count = caps.countMax {
      while Int64(user.visibleGroups) > count {
        var oldest = -1
        var oldestNewest = Int64.max
        for k in user.groups.indices where k != g && user.groups[k].visibleCount > 0 {
          let newest = user.groups[k].visible[user.groups[k].visible.count &- 1]
          if newest < oldestNewest {
            oldest = k
            oldestNewest = newest
          }
        }
        guard oldest >= 0 else { break }
        while user.groups[oldest].visibleCount > 0 { hides.append(user.hideOldest(of: oldest)) }
      }
    }
    if hides.count &- firstHidden > 1 { hides[firstHidden...].sort() }
    counters.hidden &+= hides.count &- firstHidden
    counters.unread &+= 1
    return (Int64(g &+ 1), id, Int64(user.unread.count))
  }

  /// A read by `u` of `channel` up to `ts`: removes the user's unread
  /// notifications of that channel whose message's ts is at most `ts`
  /// (appended to `removed`, ascending), those due later also cancelled
  /// (appended to `cancelled`); returns the unread count after it.
  func read(
    user u: Int32, channel: Int32, at ts: Int64, removed: inout [Int64],
    cancelled: inout [Int64]
  ) -> Int64 {
    guard let s = slot(of: u, creating: false) else { return 0 }
    return users.withUnsafeMutableBufferPointer { all in
      read(&all[s], channel: channel, at: ts, &removed, &cancelled)
    }
  }

  private func read(
    _ user: inout UserNotes, channel: Int32, at ts: Int64, _ removed: inout [Int64],
    _ cancelled: inout [Int64]
  ) -> Int64 {
    let first = removed.count
    let firstCancelled = cancelled.count
    var kept = 0
    var touchedVisible = false
    for k in user.unread.indices {
      let note = user.unread[k]
      if note.channel == channel && note.ts <= ts {
        removed.append(note.id)
        if note.deliverAt > ts { cancelled.append(note.id) }
        if note.visible { touchedVisible = true }
      } else {
        user.unread[kept] = note
        kept &+= 1
      }
    }
    let count = removed.count &- first
    guard count > 0 else { return Int64(user.unread.count) }
    user.unread.removeLast(user.unread.count &- kept)
    if touchedVisible {
      let gone = removed[first...]
      for g in user.groups.indices where user.groups[g].channel == channel {
        let before = user.groups[g].visibleCount
        guard before > 0 else { continue }
        let visible = user.groups[g].visible[user.groups[g].head...].filter {
          !Self.contains(gone, $0)
        }
        user.groups[g].visible = Array(visible)
        user.groups[g].head = 0
        if before > 0 && visible.isEmpty { user.visibleGroups &-= 1 }
      }
    }
    counters.removed &+= count
    counters.cancelled &+= cancelled.count &- firstCancelled
    counters.unread &-= count
    return Int64(user.unread.count)
  }

  /// Binary search in ascending ids.
  private static func contains(_ ids: ArraySlice<Int64>, _ id: Int64) -> Bool {
    var lo = ids.startIndex
    var hi = ids.endIndex
    while lo < hi {
      let mid = (lo &+ hi) &>> 1
      if ids[mid] < id { lo = mid &+ 1 } else { hi = mid }
    }
    return lo < ids.endIndex && ids[lo] == id
  }

  /// Calls `body` with each user row and its state.
  func forEachUser(_ body: (Int32, UserNotes) -> Void) {
    for (k, notes) in users.enumerated() { body(userRows[k], notes) }
  }

  /// Takes `notes` as user `u`'s state (`u` must have none here).
  func adopt(user u: Int32, _ notes: UserNotes) {
    let s = slot(of: u, creating: true)!
    users[s] = notes
  }

  /// Sets the unread count from the states held.
  func recountUnread() {
    counters.unread = users.reduce(0) { $0 + $1.unread.count }
  }
}
