import CPrefetch
import FanoutIndex
import FanoutModel

/// Rule 8's memory: per (user, channel) — a member slot of the index — the
/// times (ts) of the earlier lines whose 'message' pair was delivered and
/// counted. Channels are independent, so the ledger is cut into partitions
/// by channel, each walked by one thread in input order: the verdicts are
/// the same whatever the number of partitions.
///
/// Only the (user, channel) pairs that received a counted delivery have an
/// entry. Without `retention` nothing is forgotten, so the verdicts are
/// exact whatever the order of the lines' times; with it (the stream stage,
/// which runs for ever), times older than the newest one seen minus the
/// window minus `retention` are dropped, which is exact for any line at
/// most `retention` older than the newest line before it.
public final class ThrottleLedger: @unchecked Sendable {
  public let retention: Int64?
  let partitions: [ThrottlePartition]

  public init(partitions: Int, retention: Int64? = nil) {
    self.retention = retention
    self.partitions = (0..<max(1, partitions)).map { _ in ThrottlePartition() }
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
    let ledger = ThrottleLedger(partitions: count, retention: retention)
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

/// One partition of a `ThrottleLedger`: an open-addressing table from
/// member slot to a list of counted times, newest first, in a node pool —
/// no allocation per entry.
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
/// A lookup and a node visited are one cache miss each: a table entry holds
/// its key beside its list's head, a node its time beside its next, and the
/// head node where the list's tail is. The pool grows in place
/// (`MappedArray`): grown as an `Array`, each doubling copied the nodes
/// into fresh pages.
final class ThrottlePartition: @unchecked Sendable {
  /// A table entry: a member slot (−1: free) and its list's newest node.
  struct Entry {
    var key: Int32 = -1
    var head: Int32 = -1
  }

  /// A counted time and the next (older) node of its list, or −1; in a
  /// list's head node, the list's tail (its oldest node; unused in the
  /// others).
  struct Node {
    var time: Int64
    var next: Int32
    var tail: Int32
  }

  private var table = [Entry](repeating: Entry(), count: 1024)
  private var keyCount = 0
  private let nodes = MappedArray<Node>(.throttle)
  /// Whether every list is newest first (see above: not always while the
  /// partition holds fewer times than the limit).
  private var listsInOrder = true
  /// Pool size after the last sweep; the next sweep waits until it doubles.
  private var sweptAt = 0

  /// Rule 8 for one candidate pair at `ts`: true if counted (delivered),
  /// false if throttled.
  func admit(slot: Int32, ts: Int64, _ throttle: AppSettings.Throttle) -> Bool {
    let k = find(slot)
    let head = table[k].head
    guard head >= 0 else {
      insert(ts, after: -1, at: k)
      return true
    }
    // Fewer times than the limit in the whole partition: none can reach it.
    guard Int64(nodes.count) >= throttle.messages else {
      if ts < nodes[Int(head)].time { listsInOrder = false }
      insert(ts, after: -1, at: k)
      return true
    }
    if !listsInOrder { putListsInOrder() }
    let newest = nodes[Int(head)]
    if newest.time > ts && nodes[Int(newest.tail)].time > ts {
      // Older than every time in the list: none counts against it.
      insert(ts, after: newest.tail, at: k)
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
    insert(ts, after: before, at: k)
    return true
  }

  /// Adds time `t` to table entry `k`'s list after node `before` (−1: as
  /// its head).
  @inline(__always)
  private func insert(_ t: Int64, after before: Int32, at k: Int) {
    let head = table[k].head
    // (Allocated first: the pool may move as it grows.)
    let next = before < 0 ? head : nodes[Int(before)].next
    let fresh = allocate(t, next: next)
    if before < 0 {
      table[k].head = fresh
      nodes[Int(fresh)].tail = head < 0 ? fresh : nodes[Int(head)].tail
    } else {
      nodes[Int(before)].next = fresh
      if next < 0 { nodes[Int(head)].tail = fresh }
    }
  }

  /// Drops the times at or before `horizon`, and the keys left empty, once
  /// the pool has doubled since the last sweep (amortized O(1) per entry).
  func sweep(olderThan horizon: Int64) {
    guard nodes.count >= 2 * sweptAt + 4096 else { return }
    var kept: [(Int32, [Int64])] = []
    forEachKey { slot, times in
      let live = times.prefix { $0 > horizon }
      if !live.isEmpty { kept.append((slot, Array(live))) }
    }
    reset(capacity: kept.count)
    for (slot, times) in kept { adopt(slot: slot, times: times) }
    sweptAt = nodes.count
  }

  /// Calls `body` with each key and its times, newest first.
  func forEachKey(_ body: (Int32, [Int64]) -> Void) {
    if !listsInOrder { putListsInOrder() }
    forEachList { entry, times in body(entry.key, times) }
  }

  /// Calls `body` with each list's entry and its times as they are linked.
  private func forEachList(_ body: (Entry, inout [Int64]) -> Void) {
    var times: [Int64] = []
    for entry in table where entry.key >= 0 {
      times.removeAll(keepingCapacity: true)
      var node = entry.head
      while node >= 0 {
        times.append(nodes[Int(node)].time)
        node = nodes[Int(node)].next
      }
      body(entry, &times)
    }
  }

  /// Adds `times` (newest first) to `slot`'s list, which must be empty.
  func adopt(slot: Int32, times: [Int64]) {
    let k = find(slot)
    for t in times {
      let head = table[k].head
      insert(t, after: head < 0 ? -1 : nodes[Int(head)].tail, at: k)
    }
  }

  /// Sorts every list's times, newest first, along its nodes as they are
  /// linked (each list keeps its nodes, so its head and tail stay).
  @inline(never)
  private func putListsInOrder() {
    forEachList { entry, times in
      times.sort(by: >)
      var node = entry.head
      for t in times {
        nodes[Int(node)].time = t
        node = nodes[Int(node)].next
      }
    }
    listsInOrder = true
  }

  private func reset(capacity: Int) {
    var size = 1024
    while size < 2 * capacity { size *= 2 }
    table = [Entry](repeating: Entry(), count: size)
    keyCount = 0
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

  /// Where `slot`'s search in the table starts.
  @inline(__always)
  private func home(_ slot: Int32) -> Int {
    Int(UInt32(bitPattern: slot) &* 0x9E37_79B1 >> 7) & (table.count &- 1)
  }

  /// Asks for the cache line where `slot`'s lookup starts (`admit` ahead).
  @inline(__always)
  func prefetchEntry(slot: Int32) {
    table.withUnsafeBufferPointer { cprefetch_read($0.baseAddress! + home(slot)) }
  }

  /// Asks for the newest node of `slot`'s list, if its entry is where its
  /// search starts (as most are) and has one.
  @inline(__always)
  func prefetchList(slot: Int32) {
    let entry = table[home(slot)]
    if entry.key == slot && entry.head >= 0 { nodes.prefetch(Int(entry.head)) }
  }

  /// The table position of `slot`, inserted if absent.
  @inline(__always)
  private func find(_ slot: Int32) -> Int {
    if 2 * (keyCount + 1) > table.count { grow() }
    let mask = table.count - 1
    var k = home(slot)
    while true {
      let key = table[k].key
      if key == slot { return k }
      if key < 0 {
        table[k].key = slot
        keyCount += 1
        return k
      }
      k = (k + 1) & mask
    }
  }

  private func grow() {
    let old = table
    table = [Entry](repeating: Entry(), count: old.count * 2)
    keyCount = 0
    for entry in old where entry.key >= 0 {
      table[find(entry.key)] = entry
    }
  }
}
