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
/// no allocation per entry, and with lines in time order a new time goes
/// to the head of its list and a query reads at most `throttle_messages`
/// nodes before it stops.
final class ThrottlePartition: @unchecked Sendable {
  private var keys = [Int32](repeating: -1, count: 1024)
  private var heads = [Int32](repeating: -1, count: 1024)
  private var keyCount = 0
  private var nodeTime: [Int64] = []
  private var nodeNext: [Int32] = []
  /// Pool size after the last sweep; the next sweep waits until it doubles.
  private var sweptAt = 0

  /// Rule 8 for one candidate pair at `ts`: true if counted (delivered),
  /// false if throttled.
  func admit(slot: Int32, ts: Int64, _ throttle: AppSettings.Throttle) -> Bool {
    let k = find(slot)
    var count: Int64 = 0
    var before: Int32 = -1  // the last node newer than ts
    var node = heads[k]
    while node >= 0 {
      let t = nodeTime[Int(node)]
      if t > ts {
        before = node
      } else {
        // Newest first: the first time outside the window ends the walk.
        guard Evaluator.countsAgainst(t, at: ts, window: throttle.windowMilliseconds) else { break }
        count += 1
        if Evaluator.reachesLimit(count, throttle) { return false }
      }
      node = nodeNext[Int(node)]
    }
    let fresh = allocate(ts)
    if before < 0 {
      nodeNext[Int(fresh)] = heads[k]
      heads[k] = fresh
    } else {
      nodeNext[Int(fresh)] = nodeNext[Int(before)]
      nodeNext[Int(before)] = fresh
    }
    return true
  }

  /// Drops the times at or before `horizon`, and the keys left empty, once
  /// the pool has doubled since the last sweep (amortized O(1) per entry).
  func sweep(olderThan horizon: Int64) {
    guard nodeTime.count >= 2 * sweptAt + 4096 else { return }
    var kept: [(Int32, [Int64])] = []
    forEachKey { slot, times in
      let live = times.prefix { $0 > horizon }
      if !live.isEmpty { kept.append((slot, Array(live))) }
    }
    reset(capacity: kept.count)
    for (slot, times) in kept { adopt(slot: slot, times: times) }
    sweptAt = nodeTime.count
  }

  /// Calls `body` with each key and its times, newest first.
  func forEachKey(_ body: (Int32, [Int64]) -> Void) {
    var times: [Int64] = []
    for k in keys.indices where keys[k] >= 0 {
      times.removeAll(keepingCapacity: true)
      var node = heads[k]
      while node >= 0 {
        times.append(nodeTime[Int(node)])
        node = nodeNext[Int(node)]
      }
      body(keys[k], times)
    }
  }

  /// Adds `times` (newest first) to `slot`'s list, which must be empty.
  func adopt(slot: Int32, times: [Int64]) {
    let k = find(slot)
    var last: Int32 = -1
    for t in times {
      let fresh = allocate(t)
      if last < 0 { heads[k] = fresh } else { nodeNext[Int(last)] = fresh }
      last = fresh
    }
  }

  private func reset(capacity: Int) {
    var size = 1024
    while size < 2 * capacity { size *= 2 }
    keys = [Int32](repeating: -1, count: size)
    heads = [Int32](repeating: -1, count: size)
    keyCount = 0
    nodeTime.removeAll(keepingCapacity: true)
    nodeNext.removeAll(keepingCapacity: true)
  }

  private func allocate(_ t: Int64) -> Int32 {
    nodeTime.append(t)
    nodeNext.append(-1)
    return Int32(nodeTime.count - 1)
  }

  /// The table position of `slot`, inserted if absent.
  @inline(__always)
  private func find(_ slot: Int32) -> Int {
    if 2 * (keyCount + 1) > keys.count { grow() }
    let mask = keys.count - 1
    var k = Int(UInt32(bitPattern: slot) &* 0x9E37_79B1 >> 7) & mask
    while true {
      let key = keys[k]
      if key == slot { return k }
      if key < 0 {
        keys[k] = slot
        keyCount += 1
        return k
      }
      k = (k + 1) & mask
    }
  }

  private func grow() {
    let oldKeys = keys
    let oldHeads = heads
    keys = [Int32](repeating: -1, count: oldKeys.count * 2)
    heads = [Int32](repeating: -1, count: oldKeys.count * 2)
    keyCount = 0
    for k in oldKeys.indices where oldKeys[k] >= 0 {
      heads[find(oldKeys[k])] = oldHeads[k]
    }
  }
}
