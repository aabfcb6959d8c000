import CPrefetch
import FanoutIndex
import FanoutModel

/// Rule 8's memory: per (user, channel) — a member slot of the index — the
/// times (ts) of the earlier lines whose 'message' pair was delivered and
/// counted. Channels are independent, so the ledger is cut into partitions
/// by channel, each walked by one thread in input order: the verdicts are
/// the same whatever the number of partitions.
///
/// Only the (user, channel) pairs that received a counted delivery have a
/// list (and every membership a 4-byte head). Without `retention` nothing
/// is forgotten, so the verdicts are exact whatever the order of the lines'
/// times; with it (the stream stage, which runs for ever), times older
/// than the newest one seen minus the window minus `retention` are dropped,
/// which is exact for any line at most `retention` older than the newest
/// line before it.
public final class ThrottleLedger: @unchecked Sendable {
  public let retention: Int64?
  let partitions: [ThrottlePartition]

  /// A ledger for an index of `memberships` member slots.
  /// - Parameter grouped: see `ThrottlePartition.init(heads:grouped:)`.
  public init(partitions: Int, memberships: Int, retention: Int64? = nil, grouped: Bool = false) {
    self.retention = retention
    let heads = ThrottlePartition.Heads(memberships: memberships, threads: max(1, partitions))
    self.partitions = (0..<max(1, partitions)).map { _ in
      ThrottlePartition(heads: heads, grouped: grouped)
    }
  }

  @inline(__always)
  func partition(ofChannel channel: Int) -> Int { channel % partitions.count }

  /// The ledger for `index`, which replaces `previous`'s index (a stream's
  /// snapshot reload): every (user, channel) entry moves to the new index's
  /// member slot of the same user id and channel id; an entry whose
  /// membership the new snapshot lacks is dropped, as that user can receive
  /// nothing in that channel.
  public func rekeyed(from previous: Index, to index: Index, partitions count: Int)
    -> ThrottleLedger
  {
    let ledger = ThrottleLedger(
      partitions: count, memberships: index.memberCount, retention: retention)
    for part in partitions {
      part.forEachKey { slot, times in
        let oldChannel = previous.channel(ofMemberSlot: Int(slot))
        let oldUser = Int(previous.memberUser[Int(slot)])
        guard
          let channel = index.channels.find(previous.channels[oldChannel]),
          let user = index.users.find(previous.users[oldUser]),
          let newSlot = index.memberSlot(user: user, channel: Int(channel))
        else { return }
        ledger.partitions[ledger.partition(ofChannel: Int(channel))]
          .adopt(slot: Int32(newSlot), times: times)
      }
    }
    return ledger
  }
}

/// One partition of a `ThrottleLedger`: per member slot, a list of
/// counted times, newest first, in a node pool — no allocation per entry.
/// A slot's list is found by the slot itself: the ledger keeps one head per
/// member slot (`Heads`), which its partitions share, each reading and
/// writing only its own channels' slots.
///
/// While the partition holds fewer times than `throttle_messages`, no line
/// can be throttled: each time goes to its list's head, in order or not (a
/// limit no run reaches costs nothing, whatever the order of the lines).
/// Once it holds that many, the lists are put in order, once. Then lines in
/// time order (the usual case) reach a list at its head: the times in the
/// window are its first nodes, and a query reads at most `throttle_messages`
/// of them. Lines in reverse order (a log exported newest first) reach it
/// at its tail: no time in it counts against them. Only a line whose time
/// falls between the list's newest and oldest walks past the later ones.
///
/// A lookup and a node visited are one cache miss each: the slot's head,
/// then a node holding its time beside its next, and the head node where
/// the list's tail is. The pool grows in place (`MappedArray`): grown as an
/// `Array`, each doubling copied the nodes into fresh pages.
final class ThrottlePartition: @unchecked Sendable {
  /// Per member slot of the index: its list's newest node + 1, 0 when it
  /// has none. Four bytes a membership, given their pages up front on
  /// every thread (a head is read before it is written: a page read first
  /// would map the zero page, and the write would fault again); where a
  /// hash table by slot grew, each doubling rehashed into fresh pages
  /// (docs/performance.md, rule 8).
  final class Heads: @unchecked Sendable {
    fileprivate let array = MappedArray<Int32>(.throttle)

    init(memberships: Int, threads: Int) {
      array.appendZeroed(count: memberships)
      array.populate(threads: threads)
    }
  }

  /// A counted time and the next (older) node of its list, or −1; in a
  /// list's head node, the list's tail (its oldest node; unused in the
  /// others).
  struct Node {
    var time: Int64
    var next: Int32
    var tail: Int32
  }

  /// With several throttles (`admit(slot:ts:throttles:)`): per node, the
  /// throttles that counted its time; nil with one.
  private let counted: MappedArray<UInt16>?
  /// The ledger's heads, kept alive here and read through `slotHeads`.
  private let heads: Heads
  private let slotHeads: UnsafeMutablePointer<Int32>
  /// The slots with a list, in the order their first times came.
  private var keys: [Int32] = []
  private let nodes = MappedArray<Node>(.throttle)
  /// Whether every list is newest first (see above: not always while the
  /// partition holds fewer times than the limit).
  private var listsInOrder = true
  /// Pool size after the last sweep; the next sweep waits until it doubles.
  private var sweptAt = 0

  /// - Parameter grouped: whether it judges several throttles at once
  ///   (`admit(slot:ts:throttles:)`), each node marked with those that
  ///   counted it; else one (`admit(slot:ts:_:)`).
  init(heads: Heads, grouped: Bool = false) {
    self.heads = heads
    counted = grouped ? MappedArray<UInt16>(.throttle) : nil
    // (Never appended to again: its values stay where they are.)
    slotHeads = heads.array.base
  }

  /// The newest node of `slot`'s list, or −1. (Slots are the index's:
  /// checked in debug builds, as the pools' indexes are.)
  @inline(__always)
  private func newest(_ slot: Int32) -> Int32 {
    assert(slot >= 0 && Int(slot) < heads.array.count)
    return slotHeads[Int(slot)] &- 1
  }

  /// Rule 8 for one candidate pair at `ts`: true if counted (delivered),
  /// false if throttled.
  func admit(slot: Int32, ts: Int64, _ throttle: AppSettings.Throttle) -> Bool {
    let head = newest(slot)
    guard head >= 0 else {
      insert(ts, after: -1, slot: slot)
      return true
    }
    // Fewer times than the limit in the whole partition: none can reach it.
    guard Int64(nodes.count) >= throttle.messages else {
      if ts < nodes[Int(head)].time { listsInOrder = false }
      insert(ts, after: -1, slot: slot)
      return true
    }
    if !listsInOrder { putListsInOrder() }
    let newest = nodes[Int(head)]
    if newest.time > ts && nodes[Int(newest.tail)].time > ts {
      // Older than every time in the list: none counts against it.
      insert(ts, after: newest.tail, slot: slot)
      return true
    }
    // Newest first: past the times later than ts (none for lines in time
    // order), the ones in the window are counted; the first time outside
    // it ends the walk.
    var count: Int64 = 0
    var before: Int32 = -1  // the last node later than ts
    var node = head
    while node >= 0 {
      let t = nodes[Int(node)].time
      if t > ts {
        before = node
      } else {
        guard Evaluator.countsAgainst(t, at: ts, window: throttle.windowMilliseconds) else {
          break
        }
        count += 1
        if Evaluator.reachesLimit(count, throttle) { return false }
      }
      node = nodes[Int(node)].next
    }
    insert(ts, after: before, slot: slot)
    return true
  }

  /// Rule 8 for one candidate pair at `ts` under each of `throttles`
  /// (at most 16, their widest window `widest`) at once: the set of those
  /// that count it (bit v for `throttles[v]`), the others throttling it.
  /// Each throttle decides as a partition of its own would
  /// (`admit(slot:ts:_:)`): one list per slot holds the times any of them
  /// counted, each marked with those that did, and a throttle counts only
  /// its own. The lists are kept in order as times come.
  func admit(slot: Int32, ts: Int64, throttles: [AppSettings.Throttle], widest: Int64) -> UInt16 {
    let all = UInt16(truncatingIfNeeded: (1 << throttles.count) &- 1)
    let head = newest(slot)
    if head >= 0 {
      let newest = nodes[Int(head)]
      if newest.time > ts && nodes[Int(newest.tail)].time > ts {
        // Older than every time in the list: none counts against it.
        insert(ts, after: newest.tail, slot: slot, countedBy: all)
        return all
      }
    }
    let marks = counted!
    return withUnsafeTemporaryAllocation(of: Int64.self, capacity: throttles.count) { counts in
      counts.initialize(repeating: 0)
      var reached: UInt16 = 0
      var before: Int32 = -1  // the last node later than ts
      var node = head
      while node >= 0 && reached != all {
        let t = nodes[Int(node)].time
        if t > ts {
          before = node
        } else {
          guard Evaluator.countsAgainst(t, at: ts, window: widest) else { break }
          var bits = marks[Int(node)] & ~reached
          while bits != 0 {
            let v = bits.trailingZeroBitCount
            bits &= bits &- 1
            guard Evaluator.countsAgainst(t, at: ts, window: throttles[v].windowMilliseconds)
            else { continue }
            counts[v] += 1
            if Evaluator.reachesLimit(counts[v], throttles[v]) { reached |= 1 << v }
          }
        }
        node = nodes[Int(node)].next
      }
      let admitted = all & ~reached
      // (Where every throttle took it, the walk may have stopped early:
      // nothing is inserted then.)
      if admitted != 0 { insert(ts, after: before, slot: slot, countedBy: admitted) }
      return admitted
    }
  }

  /// Adds time `t` to `slot`'s list after node `before` (−1: as its head),
  /// counted by the throttles `countedBy` names (grouped only).
  @inline(__always)
  private func insert(_ t: Int64, after before: Int32, slot: Int32, countedBy: UInt16 = 1) {
    let head = newest(slot)
    // (Allocated first: the pool may move as it grows.)
    let next = before < 0 ? head : nodes[Int(before)].next
    let fresh = allocate(t, next: next)
    // A node's marks are at its own number: nodes are only ever appended
    // in a grouped partition (never swept or adopted).
    assert(counted.map { $0.count == Int(fresh) } ?? true, "marks beside their nodes")
    counted?.append(countedBy)
    if before < 0 {
      if head < 0 { keys.append(slot) }
      slotHeads[Int(slot)] = fresh &+ 1
      nodes[Int(fresh)].tail = head < 0 ? fresh : nodes[Int(head)].tail
    } else {
      nodes[Int(before)].next = fresh
      if next < 0 { nodes[Int(head)].tail = fresh }
    }
  }

  /// Drops the times at or before `horizon`, and the keys left empty, once
  /// the pool has doubled since the last sweep (amortized O(1) per entry).
  func sweep(olderThan horizon: Int64) {
    precondition(counted == nil, "a grouped partition keeps every time")
    guard nodes.count >= 2 * sweptAt + 4096 else { return }
    var kept: [(Int32, [Int64])] = []
    forEachKey { slot, times in
      let live = times.prefix { $0 > horizon }
      if !live.isEmpty { kept.append((slot, Array(live))) }
    }
    reset()
    for (slot, times) in kept { adopt(slot: slot, times: times) }
    sweptAt = nodes.count
  }

  /// Calls `body` with each key and its times, newest first.
  func forEachKey(_ body: (Int32, [Int64]) -> Void) {
    if !listsInOrder { putListsInOrder() }
    forEachList { slot, times in body(slot, times) }
  }

  /// Calls `body` with each slot that has a list and its times as they
  /// are linked.
  private func forEachList(_ body: (Int32, inout [Int64]) -> Void) {
    var times: [Int64] = []
    for slot in keys {
      times.removeAll(keepingCapacity: true)
      var node = newest(slot)
      while node >= 0 {
        times.append(nodes[Int(node)].time)
        node = nodes[Int(node)].next
      }
      body(slot, &times)
    }
  }

  /// Adds `times` (newest first) to `slot`'s list, which must be empty.
  func adopt(slot: Int32, times: [Int64]) {
    precondition(counted == nil, "a grouped partition is never carried over")
    for t in times {
      let head = newest(slot)
      insert(t, after: head < 0 ? -1 : nodes[Int(head)].tail, slot: slot)
    }
  }

  /// Sorts every list's times, newest first, along its nodes as they are
  /// linked (each list keeps its nodes, so its head and tail stay).
  @inline(never)
  private func putListsInOrder() {
    forEachList { slot, times in
      times.sort(by: >)
      var node = newest(slot)
      for t in times {
        nodes[Int(node)].time = t
        node = nodes[Int(node)].next
      }
    }
    listsInOrder = true
  }

  /// Empties every list.
  private func reset() {
    for slot in keys { slotHeads[Int(slot)] = 0 }
    keys.removeAll(keepingCapacity: true)
    nodes.removeAll()
    listsInOrder = true
  }

  /// A new node for time `t`, followed by `next`.
  private func allocate(_ t: Int64, next: Int32) -> Int32 {
    guard nodes.count < Int32.max else {
      ledgerOutOfMemory(.throttle, "reached its limit of 2^31 entries")
    }
    nodes.append(Node(time: t, next: next, tail: -1))
    return Int32(truncatingIfNeeded: nodes.count &- 1)
  }

  /// Asks for `slot`'s head (`admit` ahead).
  @inline(__always)
  func prefetchHead(slot: Int32) { cprefetch_read(slotHeads + Int(slot)) }

  /// Asks for the newest node of `slot`'s list, if it has one.
  @inline(__always)
  func prefetchList(slot: Int32) {
    let newest = newest(slot)
    if newest >= 0 { nodes.prefetch(Int(newest)) }
  }
}
