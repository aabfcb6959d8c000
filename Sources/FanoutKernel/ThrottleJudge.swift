import FanoutIndex
import FanoutModel

/// Per message of one batch, the user rows rule 8 throttles, ascending.
public struct ThrottledMembers: Sendable {
  /// Per message, where its users start in `users`, and one more at the
  /// end; empty when the batch has none.
  public var starts: [Int32] = []
  public var users: [Int32] = []

  public static let none = ThrottledMembers()

  /// The users throttled for message `m`.
  public func users(of m: Int) -> ArraySlice<Int32> {
    starts.isEmpty ? [] : users[Int(starts[m])..<Int(starts[m + 1])]
  }
}

/// Rule 8 over a run, wave by wave. A throttle verdict depends on earlier
/// lines, so it cannot be made while the chunks of a wave are evaluated in
/// parallel; it is made in between (see `Ledgers`): the ledger's
/// partitions, one thread each, walk the wave's candidates (pairs
/// delivered with trigger 'message' before rule 8) in input order, each
/// for its own channels, and throttle or count them; the evaluator then
/// singles the throttled members out.
///
/// The verdicts depend only on the lines and their order: the same for any
/// number of threads, chunks or batches.
public final class ThrottleJudge {
  public let index: Index
  /// The throttle; or the throttles of several what-if sides judging the
  /// same candidates (`ThrottleGroup`), all in one walk.
  public let throttles: [AppSettings.Throttle]
  public var throttle: AppSettings.Throttle { throttles[0] }
  public private(set) var ledger: ThrottleLedger
  private let threads: Int
  /// The newest ts evaluated, for the ledger's retention.
  private var newest = Int64.min

  /// A judge for `index` (which must set a throttle), with a fresh ledger.
  convenience init(
    index: Index, throttle: AppSettings.Throttle, threads: Int, retention: Int64? = nil
  ) {
    self.init(index: index, throttles: [throttle], threads: threads, retention: retention)
  }

  /// A judge of up to 16 `throttles` at once over the candidates of
  /// `index` (or of any index with its member slots), keeping every time
  /// (no retention) when there are several.
  init(index: Index, throttles: [AppSettings.Throttle], threads: Int, retention: Int64? = nil) {
    precondition(
      throttles.count == 1 || (throttles.count <= 16 && retention == nil),
      "several throttles: at most 16, every time kept")
    self.index = index
    self.throttles = throttles
    self.threads = max(1, threads)
    ledger = ThrottleLedger(
      partitions: self.threads, memberships: index.memberCount, retention: retention,
      grouped: throttles.count > 1)
  }

  /// Carries `previous`'s counted deliveries over to this judge's index,
  /// matched by user id and channel id (a stream's snapshot reload).
  func inherit(from previous: ThrottleJudge) {
    ledger = previous.ledger.rekeyed(from: previous.index, to: index, partitions: threads)
    newest = previous.newest
  }

  /// The members rule 8 throttles in each of `batches`, which `plan` cuts
  /// into chunks in input order (`delivered`: each chunk's pairs delivered
  /// before rule 8); updates the ledger.
  func judge(
    _ batches: [MessageBatch], plan: [(batch: Int, messages: Range<Int>)],
    delivered: [DeliveredPairs]
  ) -> [ThrottledMembers] {
    judgeEach(batches, plan: plan, delivered: delivered)[0]
  }

  /// `judge` for each of the throttles, in one walk: per throttle, per batch.
  func judgeEach(
    _ batches: [MessageBatch], plan: [(batch: Int, messages: Range<Int>)],
    delivered: [DeliveredPairs]
  ) -> [[ThrottledMembers]] {
    var numbers = [Int](repeating: 0, count: batches.count + 1)
    for (b, batch) in batches.enumerated() {
      numbers[b + 1] = numbers[b] + batch.count
      if ledger.retention != nil { newest = max(newest, batch.ts.max() ?? .min) }
    }
    let firstNumber = numbers
    let ledger = ledger
    let throttles = throttles
    let widest = throttles.map(\.windowMilliseconds).max()!
    // Times at or before the horizon can count only for lines more than
    // `retention` older than the newest.
    let horizon = ledger.retention.map { retention in
      newest.subtractingSaturated(throttle.windowMilliseconds).subtractingSaturated(
        retention)
    }
    // Per partition, per throttle.
    let found = runChunks(
      count: ledger.partitions.count, workers: threads,
      empty: [Verdicts](repeating: Verdicts(), count: throttles.count)
    ) { p in
      let partition = ledger.partitions[p]
      var verdicts = [Verdicts](repeating: Verdicts(), count: throttles.count)
      var mine = PartitionPairs()
      for (k, chunk) in plan.enumerated() {
        let batch = batches[chunk.batch]
        let pairs = delivered[k]
        let first = chunk.messages.lowerBound
        mine.collect(
          pairs,
          message: { j in ledger.partition(ofChannel: Int(batch.channel[first &+ j])) == p },
          pair: { i in pairs.triggers[i] == .message })
        var current = -1  // the message of the pairs admitted last
        func closeMessage() {
          for v in verdicts.indices {
            verdicts[v].close(message: firstNumber[chunk.batch] + current)
          }
        }
        for x in 0..<mine.count {
          // A lookup is a cache miss in the heads, then one in the list's
          // newest node: both asked for some pairs ahead.
          if x &+ Self.headsAhead < mine.count {
            partition.prefetchHead(slot: pairs.slots[Int(mine.pair[x &+ Self.headsAhead])])
          }
          if x &+ Self.listsAhead < mine.count {
            partition.prefetchList(slot: pairs.slots[Int(mine.pair[x &+ Self.listsAhead])])
          }
          let i = Int(mine.pair[x])
          let m = first &+ Int(mine.message[x])
          if m != current {
            if current >= 0 { closeMessage() }
            current = m
          }
          if throttles.count == 1 {
            if !partition.admit(slot: pairs.slots[i], ts: batch.ts[m], throttles[0]) {
              verdicts[0].users.append(pairs.users[i])
            }
          } else {
            var taken = ~partition.admit(
              slot: pairs.slots[i], ts: batch.ts[m], throttles: throttles, widest: widest)
            taken &= UInt16(truncatingIfNeeded: (1 << throttles.count) &- 1)
            while taken != 0 {
              verdicts[taken.trailingZeroBitCount].users.append(pairs.users[i])
              taken &= taken &- 1
            }
          }
        }
        if current >= 0 { closeMessage() }
      }
      if let horizon, horizon > .min { partition.sweep(olderThan: horizon) }
      return verdicts
    }
    return throttles.indices.map { v in
      Self.members(found.map { $0[v] }, batches, firstNumber: firstNumber, ledger)
    }
  }

  /// Per batch, the members throttled, from each partition's `verdicts`.
  private static func members(
    _ verdicts: [Verdicts], _ batches: [MessageBatch], firstNumber: [Int], _ ledger: ThrottleLedger
  ) -> [ThrottledMembers] {
    guard verdicts.contains(where: { !$0.messages.isEmpty }) else {
      return [ThrottledMembers](repeating: .none, count: batches.count)
    }
    // Each message's verdicts are in its channel's partition, in order.
    var next = [Int](repeating: 0, count: verdicts.count)
    return batches.enumerated().map { b, batch in
      var members = ThrottledMembers(starts: [0], users: [])
      members.starts.reserveCapacity(batch.count + 1)
      for m in 0..<batch.count {
        let p = ledger.partition(ofChannel: Int(batch.channel[m]))
        let i = next[p]
        if i < verdicts[p].messages.count && verdicts[p].messages[i] == firstNumber[b] + m {
          let from = i == 0 ? 0 : verdicts[p].ends[i - 1]
          members.users += verdicts[p].users[from..<verdicts[p].ends[i]]
          next[p] += 1
        }
        members.starts.append(Int32(members.users.count))
      }
      return members
    }
  }

  /// How many pairs ahead the walk asks for a pair's list head, and
  /// for its list's newest node.
  private static let headsAhead = 16
  private static let listsAhead = 8

  /// One partition's throttled pairs of a wave: per message (numbered in
  /// the wave) that has any, its end in `users`.
  private struct Verdicts: Sendable {
    var messages: [Int] = []
    var ends: [Int] = []
    var users: [Int32] = []

    /// Ends message `number`: listed if it throttled any user since the last.
    mutating func close(message number: Int) {
      guard users.count > (ends.last ?? 0) else { return }
      messages.append(number)
      ends.append(users.count)
    }
  }
}
