import CPrefetch
import FanoutIndex
import FanoutModel
import Glibc

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
/// partitions. Their number is a power of two (at least `Ledgers.partitions`), so
/// that a user's partition and record are bits of its row.
///
/// Memory grows with the unread notifications and the groups used (a
/// group's id is kept for the run, as ids are never reused), and with the
/// memberships that get a notification, not with users × channels: see
/// `NotificationState`.
public final class NotificationLedger: @unchecked Sendable {
  public let caps: AppSettings.NotificationGroups
  let partitions: [NotificationPartition]
  /// Per membership slot of the index: its `messages` group's place + 1
  /// in its user's partition, 0 until its first notification (the other
  /// types' groups are in each partition's `OtherGroups`). One array for
  /// all partitions, each writing only its users' entries.
  private let slotGroups = MappedArray<Int32>(.notifications)

  /// A fresh ledger for `index`'s users and memberships.
  public init(caps: AppSettings.NotificationGroups, partitions: Int, index: Index) {
    self.caps = caps
    var shift = 0
    while 1 << shift < partitions { shift += 1 }
    slotGroups.appendZeroed(count: index.memberCount)
    slotGroups.populate(threads: partitions)
    // (Never appended to again: its values stay where they are.)
    let slotGroups = slotGroups.base
    partitionMask = Int32(truncatingIfNeeded: (1 << shift) - 1)
    self.partitions = (0..<(1 << shift)).map { p in
      NotificationPartition(
        caps: caps, shift: shift, partition: p, users: index.users.count,
        slotGroups: slotGroups)
    }
  }

  /// User row u's partition is `u & partitionMask`: its low bits.
  private let partitionMask: Int32

  @inline(__always)
  func partition(ofUser u: Int32) -> Int { Int(u & partitionMask) }

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
      caps: index.settings.notificationGroups ?? caps, partitions: count, index: index)
    var channelRow = [Int32](repeating: -1, count: previous.channels.count)
    for c in 0..<previous.channels.count {
      channelRow[c] = index.channels.find(previous.channels[c]) ?? -1
    }
    for part in partitions {
      part.state.forEachUser { oldUser, exported in
        guard let user = index.users.find(previous.users[Int(oldUser)]) else { return }
        ledger.partitions[ledger.partition(ofUser: user)].state.adopt(
          user: user, exported.movedToChannels(channelRow)
        ) { index.memberSlot(user: user, channel: Int($0)) }
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

  init(
    caps: AppSettings.NotificationGroups, shift: Int, partition: Int, users: Int,
    slotGroups: UnsafeMutablePointer<Int32>
  ) {
    state = NotificationState(
      caps: caps, shift: shift, partition: partition, users: users, slotGroups: slotGroups)
  }

  /// Runs `body` on the state, held for its whole run (one access, not one
  /// per notification).
  func walk<R>(_ body: (inout NotificationState) -> R) -> R { body(&state) }
}

/// One partition's users, groups and notifications in flat pools, linked
/// by index, no allocation per user or per notification once the pools
/// have grown.
///
/// A group's unread notifications lie side by side in id order in a block
/// of `notes` (moved to a block twice the size when full): a read removes
/// from its channel's blocks those of its ts or older, looking only as far
/// as they can be as old (`Disorder`), and leaves them in place as a
/// prefix (`removedPrefix`); hiding reads none. The visible ones are always
/// the block's last ones — a notification is added with the newest id,
/// the size cap hides the oldest visible, the count cap all of a group's,
/// a read removes any — so a group keeps only where they start
/// (`visibleStart`), and its newest visible notification is its block's
/// last. With a count cap, each user's visible groups and their newest
/// ids lie in a block of `visibleGroups` too, so the cap's choice reads
/// one block, not every group. A pair's group is found by its membership
/// slot: a `messages` group in the ledger's `slotGroups`, the others in
/// `otherGroups`.
///
/// Memory: 24 bytes per unread notification (at most twice that in
/// partly filled blocks), 32 per group used (and 8 to 32 more for a
/// mentions or calls group), 16 per visible group with a count cap, 32 per
/// user row / partitions; and the ledger's 4 per membership.
struct NotificationState {
  let caps: AppSettings.NotificationGroups
  /// log2 of the partitions: user row u's record is u >> shift.
  let shift: Int
  /// This partition's number: user row u is (record << shift) | partition.
  let partition: Int
  var counters = NotificationCounters()

  /// A user's record: whether it has had any notification, the last ids
  /// given out, the unread count, and with a count cap, the visible
  /// groups' block. 32 bytes, so that a record never spans two cache
  /// lines.
  struct User {
    var lastNotification: Int64 = 0
    var unreadCount: Int64 = 0
    private var visibleBlockWord: Int32 = -1
    var lastGroup: Int32 = 0
    var visibleCount: Int32 = 0
    var visibleSize: UInt8 = 0
    var hasState = false

    var visibleBlock: Int {
      get { Int(visibleBlockWord) }
      set { visibleBlockWord = Int32(truncatingIfNeeded: newValue) }
    }
  }

  /// A group used: its id (`ordinal`), key and user, its unread
  /// notifications' block (`count` entries: a removed prefix, then the
  /// unread ones, visible from `visibleStart`), how far they lie out of ts
  /// order, and with a count cap, its place in its user's visible groups
  /// (−1: none visible). 32 bytes, as `User`.
  struct Group {
    private var blockWord: Int32 = -1
    var count: Int32 = 0
    var visibleStart: Int32 = 0
    var ordinal: Int32
    var channel: Int32
    var record: Int32
    var visiblePlace: Int32 = -1
    var blockSize: UInt8 = 0
    var type: UInt8
    /// How far a notification's ts may lie before an earlier one's
    /// (`Disorder`): 0 in ts order.
    var disorder: UInt8 = 0

    init(ordinal: Int32, channel: Int32, record: Int32, type: UInt8) {
      self.ordinal = ordinal
      self.channel = channel
      self.record = record
      self.type = type
    }

    var block: Int {
      get { Int(blockWord) }
      set { blockWord = Int32(truncatingIfNeeded: newValue) }
    }

    var visibleCount: Int32 { count &- visibleStart }
  }

  /// By user row >> shift: one record per user of the partition. A user's
  /// record is found without a lookup.
  private let users = MappedArray<User>(.notifications)
  private let groups = MappedArray<Group>(.notifications)
  /// Per unread notification: id, message ts, delivery time.
  private var notes = BlockPool(width: 3)
  /// Per visible group (with a count cap): newest visible id, group.
  private var visibleGroups = BlockPool(width: 2)
  /// Whether the visible groups are tracked: only a count cap needs them.
  private let tracksVisibleGroups: Bool

  /// See `NotificationLedger.slotGroups`.
  private let slotGroups: UnsafeMutablePointer<Int32>
  /// The groups of types other than `messages`, by slot and type.
  private var otherGroups = OtherGroups()

  init(
    caps: AppSettings.NotificationGroups, shift: Int, partition: Int, users: Int,
    slotGroups: UnsafeMutablePointer<Int32>
  ) {
    self.caps = caps
    self.shift = shift
    self.partition = partition
    self.slotGroups = slotGroups
    tracksVisibleGroups = caps.countMax != nil
    self.users.append(repeating: User(), count: users &>> shift &+ 1)
  }

  // MARK: The rules

  /// The notification of a pair delivered to `u` in `channel` (its
  /// membership `slot`): its group and id, the badge, and the ids it hid
  /// (appended to `hides`, ascending).
  mutating func add(
    user u: Int32, slot: Int, channel: Int32, trigger: Trigger, ts: Int64, deliverAt: Int64,
    hides: inout [Int64]
  ) -> (group: Int64, id: Int64, badge: Int64) {
    let r = record(of: u)
    users[r].lastNotification &+= 1
    let id = users[r].lastNotification
    let g = group(
      record: r, slot: slot, channel: channel, type: NotificationGroupType(trigger).rawValue)
    appendNote(group: g, id: id, ts: ts, due: deliverAt)
    users[r].unreadCount &+= 1
    let firstHidden = hides.count
    // The size cap: the group's oldest visible notifications.
    if let size = caps.sizeMax {
      while Int64(groups[g].visibleCount) > size {
        hides.append(notes[groups[g].block, Int(groups[g].visibleStart), 0])
        groups[g].visibleStart &+= 1
      }
    }
    if tracksVisibleGroups { setNewestVisible(group: g, id) }
    // The count cap: the other group whose newest visible notification is oldest.
    if let count = caps.countMax {
      while Int64(users[r].visibleCount) > count {
        guard let oldest = countCapChoice(record: r, besides: g) else { break }
        hideAll(group: oldest, into: &hides)
      }
    }
    let hidden = hides.count &- firstHidden
    if hidden > 1 { hides[firstHidden...].sort() }
    counters.hidden &+= hidden
    counters.unread &+= 1
    return (Int64(groups[g].ordinal), id, users[r].unreadCount)
  }

  /// A read by `u` of a channel (its membership `slot`) up to `ts`:
  /// removes the user's unread notifications of that channel whose
  /// message's ts is at most `ts` (appended to `removed`, ascending), those
  /// due later also cancelled (appended to `cancelled`); returns the unread
  /// count after it.
  mutating func read(
    user u: Int32, slot: Int, at ts: Int64, removed: inout [Int64], cancelled: inout [Int64]
  ) -> Int64 {
    let r = record(ofUser: u)
    guard r < users.count, users[r].hasState else { return 0 }
    let first = removed.count
    let firstCancelled = cancelled.count
    // Only the channel's groups: a read costs that channel's unread notifications.
    for type in NotificationGroupType.allCases {
      guard let g = existingGroup(slot: slot, type: type.rawValue) else { continue }
      let count = Int(groups[g].count)
      guard count > 0 else { continue }
      let visibleStart = Int(groups[g].visibleStart)
      let block = groups[g].block
      let start = removedPrefix(group: g)
      // Notifications more than the group's disorder after the read's ts
      // stay, and so do all after them: only those before the first of
      // them are looked at (with traffic in time order, those removed and
      // one more), however many wait unread.
      let limit = Disorder.reach(of: ts, groups[g].disorder)
      var stop = start
      var firstRemoved = -1
      var kept = 0
      var keptHidden = 0
      while stop < count {
        let noteTs = notes[block, stop, 1]
        if noteTs > limit { break }
        if noteTs <= ts {
          if firstRemoved < 0 { firstRemoved = stop }
          let id = notes[block, stop, 0]
          removed.append(id)
          if notes[block, stop, 2] > ts { cancelled.append(id) }
        } else {
          kept &+= 1
          if stop < visibleStart { keptHidden &+= 1 }
        }
        stop &+= 1
      }
      guard firstRemoved >= 0 else { continue }
      var live: Range<Int>
      var newVisibleStart = visibleStart
      if stop == count {
        // It looked at them all: those kept after the first removed move
        // up over the holes.
        var to = firstRemoved
        for i in (firstRemoved &+ 1)..<count where notes[block, i, 1] > ts {
          notes.copy(block, i, to: to)
          to &+= 1
        }
        live = start..<to
        newVisibleStart = start &+ keptHidden
        if groups[g].disorder == Disorder.unbounded {
          groups[g].disorder = Disorder.measured(notes, block, live)
        }
      } else {
        // Those kept of the ones it looked at move behind the removed
        // ones, which join the removed prefix, left in place.
        var to = stop &- 1
        for i in stride(from: stop &- 1, through: start, by: -1) where notes[block, i, 1] > ts {
          if i != to { notes.copy(block, i, to: to) }
          to &-= 1
        }
        live = (stop &- kept)..<count
        if visibleStart < stop { newVisibleStart = live.lowerBound &+ keptHidden }
      }
      if live.isEmpty {
        notes.release(block, size: groups[g].blockSize)
        groups[g].block = BlockPool.none
        groups[g].count = 0
        groups[g].visibleStart = 0
      } else {
        if live.lowerBound > 0 { notes[block, 0, 0] = Int64(-live.lowerBound) }
        groups[g].count = Int32(live.upperBound)
        groups[g].visibleStart = Int32(newVisibleStart)
      }
      if tracksVisibleGroups {
        if groups[g].visibleCount > 0 {
          setNewestVisible(group: g, notes[block, live.upperBound &- 1, 0])
        } else if groups[g].visiblePlace >= 0 {
          removeVisible(group: g)
        }
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

  /// The count cap's choice for user record `r`: the visible group other
  /// than `g` whose newest visible notification is oldest.
  @inline(__always)
  private func countCapChoice(record r: Int, besides g: Int) -> Int? {
    let block = users[r].visibleBlock
    var oldest = -1
    var oldestNewest = Int64.max
    for i in 0..<Int(users[r].visibleCount) {
      let k = Int(visibleGroups[block, i, 1])
      let newest = visibleGroups[block, i, 0]
      if k != g && newest < oldestNewest {
        oldest = k
        oldestNewest = newest
      }
    }
    return oldest >= 0 ? oldest : nil
  }

  /// Hides every visible notification of group `g` (appending their ids).
  private mutating func hideAll(group g: Int, into hides: inout [Int64]) {
    for i in Int(groups[g].visibleStart)..<Int(groups[g].count) {
      hides.append(notes[groups[g].block, i, 0])
    }
    groups[g].visibleStart = groups[g].count
    removeVisible(group: g)
  }

  // MARK: Prefetching

  // A pair's `add` waits on a chain of cache misses — the user's record
  // and the slot's group entry, then the group and the user's visible
  // groups, then the blocks it writes and the group the count cap hides,
  // then that group's block — and pairs of one partition rarely share
  // them. The walk asks for each link some pairs ahead (`NotificationJudge`),
  // so that the misses of several pairs overlap. A prefetch changes no
  // state; what it finds may be stale by the time the pair is added, which
  // costs only a miss.

  /// The record of user row `u` in this partition.
  @inline(__always)
  func record(ofUser u: Int32) -> Int { Int(u) &>> shift }

  /// The first links of a pair of user record `r` in membership `slot`:
  /// the user's record and the slot's group entry.
  @inline(__always)
  func prefetchUser(record r: Int, slot: Int, type: UInt8) {
    if r < users.count { users.prefetch(r) }
    if type == NotificationGroupType.messages.rawValue {
      cprefetch_read(slotGroups + slot)
    } else {
      otherGroups.prefetch(slot: slot, type: type)
    }
  }

  /// The second: the group's record and the user's visible groups.
  /// Returns the group (−1: the user has not used it yet).
  @inline(__always)
  func prefetchGroup(record r: Int, slot: Int, type: UInt8) -> Int {
    guard r < users.count, users[r].hasState else { return -1 }
    // (Up to the entry a new visible group would take.)
    visibleGroups.prefetch(users[r].visibleBlock, entries: 0...Int(users[r].visibleCount))
    guard let g = existingGroup(slot: slot, type: type) else { return -1 }
    groups.prefetch(g)
    return g
  }

  /// The third: where group `g`'s new notification goes and its oldest
  /// visible one (the size cap hides it), and the group the count cap
  /// would hide, which it returns (−1: none).
  @inline(__always)
  func prefetchBlocks(record r: Int, group g: Int) -> Int {
    guard r < users.count, users[r].hasState else { return -1 }
    if g >= 0 {
      let count = Int(groups[g].count)
      notes.prefetch(groups[g].block, entries: count...count)
      let start = Int(groups[g].visibleStart)
      notes.prefetch(groups[g].block, entries: start...start)
    }
    guard let count = caps.countMax, Int64(users[r].visibleCount) >= count,
      let oldest = countCapChoice(record: r, besides: g)
    else { return -1 }
    groups.prefetch(oldest)
    return oldest
  }

  /// The fourth: the visible notifications of group `g`, which the count
  /// cap would hide.
  @inline(__always)
  func prefetchHidden(group g: Int) {
    guard g >= 0, groups[g].count > groups[g].visibleStart else { return }
    notes.prefetch(
      groups[g].block, entries: Int(groups[g].visibleStart)...Int(groups[g].count &- 1))
  }

  // MARK: Pools

  @inline(__always)
  private mutating func record(of u: Int32) -> Int {
    let k = record(ofUser: u)
    if k >= users.count {
      users.append(repeating: User(), count: k &+ 1 &- users.count)
    }
    users[k].hasState = true
    return k
  }

  /// The group of membership `slot` and `type`, if its user has used it.
  @inline(__always)
  private func existingGroup(slot: Int, type: UInt8) -> Int? {
    guard type == NotificationGroupType.messages.rawValue else {
      return otherGroups.find(slot: slot, type: type)
    }
    let place = slotGroups[slot]
    return place == 0 ? nil : Int(place) &- 1
  }

  /// The group of membership `slot` (user record `r` in `channel`) and
  /// `type`, made on first use with the user's next group id.
  @inline(__always)
  private mutating func group(record r: Int, slot: Int, channel: Int32, type: UInt8) -> Int {
    if let g = existingGroup(slot: slot, type: type) { return g }
    let g = newGroup(record: r, channel: channel, type: type)
    if type == NotificationGroupType.messages.rawValue {
      slotGroups[slot] = Int32(truncatingIfNeeded: g &+ 1)
    } else {
      otherGroups.insert(slot: slot, type: type, group: g)
    }
    return g
  }

  private mutating func newGroup(record r: Int, channel: Int32, type: UInt8) -> Int {
    users[r].lastGroup &+= 1
    groups.append(
      Group(ordinal: users[r].lastGroup, channel: channel, record: Int32(r), type: type))
    return groups.count &- 1
  }

  /// How many of group `g`'s block's first entries a read removed and
  /// left in place (`read`): their number, negated, is entry 0's id word
  /// (ids are 1 and up); they go when the block is full.
  @inline(__always)
  private func removedPrefix(group g: Int) -> Int {
    guard groups[g].count > 0 else { return 0 }
    let first = notes[groups[g].block, 0, 0]
    return first < 0 ? Int(-first) : 0
  }

  /// Appends a notification to group `g`'s block (the newest id).
  @inline(__always)
  private mutating func appendNote(group g: Int, id: Int64, ts: Int64, due: Int64) {
    var count = Int(groups[g].count)
    if groups[g].block == BlockPool.none {
      groups[g].blockSize = 1
      groups[g].block = notes.allocate(size: 1)
    } else if count == BlockPool.capacity(groups[g].blockSize) {
      // A full block first drops its removed prefix; it grows if it is
      // still more than half full, so that either way the next time it is
      // full is as many appends away as it moved entries.
      let removed = removedPrefix(group: g)
      if removed > 0 {
        for i in removed..<count { notes.copy(groups[g].block, i, to: i &- removed) }
        count &-= removed
        groups[g].count = Int32(count)
        groups[g].visibleStart &-= Int32(removed)
      }
      if count &* 2 > BlockPool.capacity(groups[g].blockSize) {
        groups[g].block = notes.grow(groups[g].block, size: groups[g].blockSize, count: count)
        groups[g].blockSize &+= 1
      }
    }
    let block = groups[g].block
    if count == 0 {
      groups[g].disorder = 0
    } else if ts < notes[block, count &- 1, 1] && groups[g].disorder != Disorder.unbounded {
      groups[g].disorder = Disorder.after(
        ts, groups[g].disorder, notes, block, removedPrefix(group: g)..<count)
    }
    notes[block, count, 0] = id
    notes[block, count, 1] = ts
    notes[block, count, 2] = due
    groups[g].count &+= 1
  }

  /// Group `g`'s newest visible id is `id`: its entry in its user's
  /// visible groups, made if it had none.
  @inline(__always)
  private mutating func setNewestVisible(group g: Int, _ id: Int64) {
    let place = Int(groups[g].visiblePlace)
    if place >= 0 {
      visibleGroups[users[Int(groups[g].record)].visibleBlock, place, 0] = id
      return
    }
    let r = Int(groups[g].record)
    let count = Int(users[r].visibleCount)
    if users[r].visibleBlock == BlockPool.none {
      users[r].visibleSize = 1
      users[r].visibleBlock = visibleGroups.allocate(size: 1)
    } else if count == BlockPool.capacity(users[r].visibleSize) {
      users[r].visibleBlock = visibleGroups.grow(
        users[r].visibleBlock, size: users[r].visibleSize, count: count)
      users[r].visibleSize &+= 1
    }
    visibleGroups[users[r].visibleBlock, count, 0] = id
    visibleGroups[users[r].visibleBlock, count, 1] = Int64(g)
    groups[g].visiblePlace = Int32(count)
    users[r].visibleCount &+= 1
  }

  /// Takes group `g` (none visible now) out of its user's visible groups:
  /// the last entry moves into its place.
  private mutating func removeVisible(group g: Int) {
    let r = Int(groups[g].record)
    let place = Int(groups[g].visiblePlace)
    guard place >= 0 else { return }
    let block = users[r].visibleBlock
    let last = Int(users[r].visibleCount) &- 1
    if place != last {
      visibleGroups.copy(block, last, to: place)
      groups[Int(visibleGroups[block, place, 1])].visiblePlace = Int32(place)
    }
    groups[g].visiblePlace = -1
    users[r].visibleCount = Int32(last)
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
    // Each record's groups, by counting.
    var starts = [Int](repeating: 0, count: users.count &+ 1)
    for g in 0..<groups.count { starts[Int(groups[g].record) &+ 1] &+= 1 }
    for r in 0..<users.count { starts[r &+ 1] &+= starts[r] }
    var next = starts
    var groupsOf = [Int](repeating: 0, count: groups.count)
    for g in 0..<groups.count {
      let r = Int(groups[g].record)
      groupsOf[next[r]] = g
      next[r] &+= 1
    }
    for r in 0..<users.count where users[r].hasState {
      var used = [(channel: Int32, type: UInt8)](
        repeating: (-1, 0), count: Int(users[r].lastGroup))
      var unread: [(id: Int64, group: Int32, ts: Int64, due: Int64, visible: Bool)] = []
      for g in groupsOf[starts[r]..<starts[r &+ 1]] {
        let group = groups[g]
        used[Int(group.ordinal) - 1] = (group.channel, group.type)
        for i in removedPrefix(group: g)..<Int(group.count) {
          unread.append(
            (
              notes[group.block, i, 0], group.ordinal, notes[group.block, i, 1],
              notes[group.block, i, 2], i >= Int(group.visibleStart)
            ))
        }
      }
      unread.sort { $0.id < $1.id }
      body(
        Int32(truncatingIfNeeded: r &<< shift | partition),
        Exported(lastNotification: users[r].lastNotification, groups: used, unread: unread))
    }
  }

  /// Takes `exported` as user `u`'s state (`u` must have none here);
  /// `slot` gives `u`'s membership slot in a channel, if any.
  mutating func adopt(user u: Int32, _ exported: Exported, slot: (Int32) -> Int?) {
    let r = record(of: u)
    users[r].lastNotification = exported.lastNotification
    var made: [Int] = []
    for (channel, type) in exported.groups {
      // A group out of reach (its channel gone, or the user no member)
      // keeps its id and its channel, outside `slotGroups`: a later
      // snapshot that has the membership again finds it.
      if channel >= 0, let slot = slot(channel) {
        made.append(group(record: r, slot: slot, channel: channel, type: type))
      } else {
        made.append(newGroup(record: r, channel: channel, type: type))
      }
    }
    // In id order, a group's hidden notifications before its visible ones.
    for note in exported.unread {
      let g = made[Int(note.group) - 1]
      appendNote(group: g, id: note.id, ts: note.ts, due: note.due)
      if !note.visible { groups[g].visibleStart = groups[g].count }
      users[r].unreadCount &+= 1
    }
    if tracksVisibleGroups {
      for g in made where groups[g].visibleCount > 0 {
        setNewestVisible(group: g, notes[groups[g].block, Int(groups[g].count) &- 1, 0])
      }
    }
  }

  /// Sets the unread count from the states held.
  mutating func recountUnread() {
    counters.unread = Int((0..<users.count).reduce(0) { $0 &+ users[$1].unreadCount })
  }
}

/// How far a group's notifications lie out of ts order, so that a read
/// looks only at those that can be as old as it (`NotificationState.read`)
/// — with traffic in time order, the ones it removes and one more, where
/// it looked at the whole backlog; a few ms of jitter between servers'
/// clocks costs a few more. A class c stands for a slack of 2^(c − 1) ms:
/// no notification's ts is more than that before an earlier one's (0:
/// none is; `unbounded`: a read looks at them all).
enum Disorder {
  static let unbounded: UInt8 = 64
  /// How far back an append looks for the newest ts before it: as many
  /// as a busy channel's jitter spans (100 messages a second with clocks
  /// ±1.5 s apart put ~300 in it: with 64, each read then looked at all).
  static let lookBack = 1_024

  /// The slack of class `c` (below `unbounded`), in ms.
  @inline(__always)
  static func slack(_ c: UInt8) -> Int64 {
    c == 0 ? 0 : 1 &<< Int64(c &- 1)
  }

  /// How far a read at `ts` looks in a group of class `c`: up to the first
  /// notification newer than `ts` plus the slack; to the end when
  /// `unbounded` (whose ts may span more than any slack, up to 2^64 ms).
  @inline(__always)
  static func reach(of ts: Int64, _ c: UInt8) -> Int64 {
    c < unbounded ? ts.addingSaturated(slack(c)) : .max
  }

  /// The least class whose slack is at least `behind` ms (≥ 0).
  @inline(__always)
  static func covering(_ behind: Int64) -> UInt8 {
    behind == 0 ? 0 : UInt8(min(Int(unbounded), 65 &- (behind &- 1).leadingZeroBitCount))
  }

  /// The class once a notification of `ts`, older than the last of the
  /// group's `live` notifications in `block`, is appended to them (class
  /// `c` so far): the newest ts before it is found looking back from the
  /// last (none before an entry is newer than its ts plus the slack), at
  /// most `lookBack` entries, else the class is `unbounded`.
  static func after(_ ts: Int64, _ c: UInt8, _ notes: BlockPool, _ block: Int, _ live: Range<Int>)
    -> UInt8
  {
    let slack = slack(c)
    var newest = notes[block, live.upperBound &- 1, 1]
    var i = live.upperBound &- 2
    while i >= live.lowerBound {
      let (reach, overflow) = notes[block, i, 1].addingReportingOverflow(slack)
      if !overflow && reach <= newest { break }
      newest = max(newest, notes[block, i, 1])
      if live.upperBound &- i > lookBack { return unbounded }
      i &-= 1
    }
    let (behind, overflow) = newest.subtractingReportingOverflow(ts)
    return overflow ? unbounded : max(c, covering(behind))
  }

  /// The class of the `live` notifications in `block`, measured.
  static func measured(_ notes: BlockPool, _ block: Int, _ live: Range<Int>) -> UInt8 {
    var newest = Int64.min
    var c: UInt8 = 0
    for i in live {
      let ts = notes[block, i, 1]
      if ts < newest {
        let (behind, overflow) = newest.subtractingReportingOverflow(ts)
        c = overflow ? unbounded : max(c, covering(behind))
      }
      newest = max(newest, ts)
    }
    return c
  }
}

/// Lists of fixed-width entries (`width` words each): a list's entries lie
/// side by side in a block of 2^(size − 1) entries, moved to a block twice
/// the size when full. Blocks of a size below `largeSize` (up to 64
/// entries) lie in one flat array; released ones are kept by size for
/// reuse (linked through their first word), and are named by their first
/// entry's number (kept in 32 bits by `User` and `Group`: 2^31 entries,
/// 48 GB of notifications).
/// Larger blocks are allocations of their own, grown in place where the
/// allocator can (`realloc`), named by −2 − their number in `large`: a
/// group of a broadcast channel grows to thousands of notifications, and
/// each block it outgrew would stay in the array for a group of that size,
/// which few groups ever are (blocks took 8.6 words per unread notification
/// where 3 are needed, at 10,000 lines of 300k-user broadcast traffic).
struct BlockPool {
  let width: Int
  private let words = MappedArray<Int64>(.notifications)
  /// Per size, the first released block (−1: none).
  private var released: [Int] = []
  private let large = LargeBlocks()

  /// No block.
  static let none = -1
  /// Blocks of this size and more (2^(size − 1) entries) are `large`.
  static let largeSize: UInt8 = 8

  init(width: Int) { self.width = width }

  /// How many entries a block of `size` holds.
  @inline(__always)
  static func capacity(_ size: UInt8) -> Int { 1 &<< (Int(size) &- 1) }

  /// Where word `field` of entry `i` of `block` is.
  @inline(__always)
  private func address(_ block: Int, _ i: Int, _ field: Int) -> UnsafeMutablePointer<Int64> {
    block >= 0
      ? words.base + ((block &+ i) &* width &+ field)
      : large.table[-2 &- block].unsafelyUnwrapped + (i &* width &+ field)
  }

  /// Word `field` of entry `i` of the block at `block`.
  @inline(__always)
  subscript(block: Int, i: Int, field: Int) -> Int64 {
    get { address(block, i, field).pointee }
    nonmutating set { address(block, i, field).pointee = newValue }
  }

  /// Copies entry `i` of `block` over entry `j`.
  @inline(__always)
  func copy(_ block: Int, _ i: Int, to j: Int) {
    for field in 0..<width { self[block, j, field] = self[block, i, field] }
  }

  mutating func allocate(size: UInt8) -> Int {
    if size >= Self.largeSize {
      return -2 &- large.allocate(words: Self.capacity(size) &* width)
    }
    let s = Int(size)
    if s < released.count && released[s] >= 0 {
      let block = released[s]
      released[s] = Int(words[block &* width])
      return block
    }
    let block = words.count / width
    guard block <= Int32.max else {
      ledgerOutOfMemory(.notifications, "reached its limit of 2^31 entries")
    }
    words.append(repeating: 0, count: Self.capacity(size) &* width)
    return block
  }

  mutating func release(_ block: Int, size: UInt8) {
    if block < 0 {
      large.release(-2 &- block)
      return
    }
    let s = Int(size)
    if s >= released.count { released += [Int](repeating: -1, count: s &+ 1 &- released.count) }
    words[block &* width] = Int64(released[s])
    released[s] = block
  }

  /// The block's `count` entries in a block twice the size (the same
  /// block, when large); the old one is released.
  mutating func grow(_ block: Int, size: UInt8, count: Int) -> Int {
    if block < 0 {
      large.resize(-2 &- block, words: Self.capacity(size &+ 1) &* width)
      return block
    }
    let bigger = allocate(size: size &+ 1)
    for i in 0..<count {
      for field in 0..<width { self[bigger, i, field] = self[block, i, field] }
    }
    release(block, size: size)
    return bigger
  }

  /// Asks for the cache lines of entries `entries` of `block` (none for
  /// `none`): the first's and the last's, as blocks are not aligned to
  /// lines and a few entries span two (a wider range is not asked whole).
  @inline(__always)
  func prefetch(_ block: Int, entries: ClosedRange<Int>) {
    guard block != Self.none else { return }
    cprefetch_read(address(block, entries.lowerBound, 0))
    cprefetch_read(address(block, entries.upperBound, width &- 1))
  }
}

/// `BlockPool`'s large blocks: a table of allocations, numbered; a number
/// released is given again.
private final class LargeBlocks: @unchecked Sendable {
  /// Read on every access to a large block: no exclusivity check (one
  /// thread at a time uses a pool).
  @exclusivity(unchecked) private(set) var table = UnsafeMutablePointer<
    UnsafeMutablePointer<Int64>?
  >.allocate(capacity: 0)
  private var count = 0
  private var capacity = 0
  private var released: [Int] = []

  deinit {
    for k in 0..<count { free(table[k]) }
    table.deallocate()
  }

  /// A new block of `words` words; its number.
  func allocate(words: Int) -> Int {
    let pointer = Self.reallocate(nil, words: words)
    if let k = released.popLast() {
      table[k] = pointer
      return k
    }
    if count == capacity {
      let bigger = UnsafeMutablePointer<UnsafeMutablePointer<Int64>?>.allocate(
        capacity: max(64, 2 &* capacity))
      bigger.initialize(from: table, count: count)
      table.deallocate()
      table = bigger
      capacity = max(64, 2 &* capacity)
    }
    table[count] = pointer
    count &+= 1
    return count &- 1
  }

  /// Block `k` made `words` words long, its entries kept.
  func resize(_ k: Int, words: Int) { table[k] = Self.reallocate(table[k], words: words) }

  /// `block` (nil: a new one) made `words` words long.
  private static func reallocate(_ block: UnsafeMutablePointer<Int64>?, words: Int)
    -> UnsafeMutablePointer<Int64>
  {
    guard let moved = realloc(block, words &* MemoryLayout<Int64>.stride) else {
      ledgerOutOfMemory(.notifications, "could not allocate \(words * 8) bytes")
    }
    return moved.bindMemory(to: Int64.self, capacity: words)
  }

  func release(_ k: Int) {
    free(table[k])
    table[k] = nil
    released.append(k)
  }
}
