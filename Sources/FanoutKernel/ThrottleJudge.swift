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
  public let throttle: AppSettings.Throttle
  public private(set) var ledger: ThrottleLedger
  private let threads: Int
  /// The newest ts evaluated, for the ledger's retention.
  private var newest = Int64.min

  /// A judge for `index` (which must set a throttle), with a fresh ledger.
  init(index: Index, throttle: AppSettings.Throttle, threads: Int, retention: Int64? = nil) {
    self.index = index
    self.throttle = throttle
    self.threads = max(1, threads)
    ledger = ThrottleLedger(
      partitions: self.threads, memberships: index.memberCount, retention: retention)
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
    var numbers = [Int](repeating: 0, count: batches.count + 1)
    for (b, batch) in batches.enumerated() {
      numbers[b + 1] = numbers[b] + batch.count
      if ledger.retention != nil { newest = max(newest, batch.ts.max() ?? .min) }
    }
    let firstNumber = numbers
    let ledger = ledger
    let throttle = throttle
    // Times at or before the horizon can count only for lines more than
    // `retention` older than the newest.
    let horizon = ledger.retention.map { retention in
      newest.subtractingSaturated(throttle.windowMilliseconds).subtractingSaturated(
        retention)
    }
    let verdicts = runChunks(
      count: ledger.partitions.count, workers: threads, empty: Verdicts()
    ) { p in
      let partition = ledger.partitions[p]
      var verdicts = Verdicts()
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
        var before = 0  // where its throttled users start
        func closeMessage() {
          guard current >= 0, verdicts.users.count > before else { return }
          verdicts.messages.append(firstNumber[chunk.batch] + current)
          verdicts.ends.append(verdicts.users.count)
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
            closeMessage()
            (current, before) = (m, verdicts.users.count)
          }
          if !partition.admit(slot: pairs.slots[i], ts: batch.ts[m], throttle) {
            verdicts.users.append(pairs.users[i])
          }
        }
        closeMessage()
      }
      if let horizon, horizon > .min { partition.sweep(olderThan: horizon) }
      return verdicts
    }
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
  }
}
