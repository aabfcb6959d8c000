import FanoutIndex
import FanoutModel
import FanoutTime

/// Rule 8 applied after the fact. A comparison's pass before its ledgers
/// evaluates each chunk without rule 8, keeping every pair's outcome
/// (`.outcomesAndDeliveredPairs`); once the throttle has judged the
/// chunk's candidates in input order, its verdicts complete those outcomes
/// here instead of a second evaluation of every pair.
extension Evaluator {
  /// Makes each pair `throttled` names throttled in `result` (evaluated
  /// without rule 8, with `.outcomesAndDeliveredPairs`, from `messages`
  /// of `batch`, by an evaluator of this one's index), as `evaluatePair`
  /// would have: a throttled pair is one delivered with trigger
  /// 'message', so it passed the gateway gate; its
  /// deliveries are taken back (its blocked devices stay counted), it is
  /// no longer delivered or deferred, and it is delivered at no hour but
  /// its message's.
  ///
  /// - Complexity: O(pairs of the messages with a throttled member +
  ///   the throttled members' devices).
  public func applyThrottle(
    _ throttled: ThrottledMembers, _ batch: MessageBatch, messages: Range<Int>,
    to result: inout ChunkResult
  ) {
    guard !throttled.starts.isEmpty else { return }
    var listed = ChunkResult(gateways: index.gateways.count)
    listThrottled(throttled, batch, messages: messages, decidedBy: result, into: &listed)
    for (n, i) in listed.redecidedPairs.enumerated() {
      result.pairOutcomes[Int(i)] = listed.redecidedOutcomes[n]
      result.pairDeliveryHours[Int(i)] = listed.redecidedDeliveryHours[n]
    }
    result.counters.add(listed.counters)
  }

  /// Lists in `result` (empty) each pair of `decidedByA` that `throttled`
  /// names, as `applyThrottle` would make it: its place among
  /// `decidedByA`'s pairs of the chunk (`ChunkResult.redecidedPairs`),
  /// its outcome (throttled) and hour (its message's). `decidedByA` is a
  /// pass before the ledgers, no pair of it throttled, by an index whose
  /// rules 0–7 decide as this one's (`Index.decidesAlikeBeforeLedgers`):
  /// every pair not listed is its. `result`'s counters gain only the
  /// differences: add `decidedByA`'s.
  ///
  /// A what-if side whose SQL set only a throttle (A having none) so
  /// costs its throttled pairs, where a copy of A's outcomes to throttle
  /// and compare cost every pair of the chunk.
  ///
  /// - Complexity: O(pairs of the messages with a throttled member +
  ///   the throttled members' devices).
  public func listThrottled(
    _ throttled: ThrottledMembers, _ batch: MessageBatch, messages: Range<Int>,
    decidedBy a: ChunkResult, into result: inout ChunkResult
  ) {
    precondition(
      a.delivered.ends.count == messages.count, "outcomes and delivered pairs recorded")
    guard !throttled.starts.isEmpty else { return }
    var pairStart = 0
    var deliveredStart = 0
    for (k, m) in messages.enumerated() {
      let pairEnd = Int(a.messagePairEnds[k])
      let deliveredEnd = Int(a.delivered.ends[k])
      defer { (pairStart, deliveredStart) = (pairEnd, deliveredEnd) }
      let users = throttled.users(of: m)
      guard !users.isEmpty else { continue }
      let ts = batch.ts[m]
      let category = Int(batch.category[m])
      let hour = UInt8(LocalTime.utcHour(millis: ts))
      // Both lists, and the throttled users, ascend by user row.
      var i = pairStart
      var d = deliveredStart
      for u in users {
        while i < pairEnd && a.pairUsers[i] != u { i &+= 1 }
        while d < deliveredEnd && a.delivered.users[d] != u { d &+= 1 }
        precondition(
          i < pairEnd && d < deliveredEnd && a.pairOutcomes[i] == .delivered(.message),
          "rule 8 throttles only pairs delivered with trigger 'message'")
        result.listRedecided(i, of: a, .suppressed(.throttled), deliveryHour: hour)
        takeBackThrottled(
          user: u, deliverAt: a.delivered.deliverAt[d], ts: ts, category: category,
          deliveriesCounted: true, &result)
      }
    }
    moveScratchCounters(into: &result)
  }

  /// Takes back a pair of user row `u` that was counted delivered (at
  /// `deliverAt`, for a message at `ts` of `category`) before rule 8
  /// throttled it: it is suppressed as throttled, no longer delivered or
  /// deferred, and if its deliveries were counted, they are taken back
  /// (through the scratch counters). Its devices the gate blocked stay
  /// counted, as `evaluatePair` counts them.
  @inline(__always)
  func takeBackThrottled(
    user u: Int32, deliverAt: Int64, ts: Int64, category: Int, deliveriesCounted: Bool,
    _ result: inout ChunkResult
  ) {
    result.counters.delivered -= 1
    result.counters.suppressed[Int(Reason.throttled.rawValue)] += 1
    if deliverAt > ts { result.counters.deferred -= 1 }
    if deliveriesCounted {
      _ = gateDevices(
        user: u, columns.userState[Int(u)], category: category, delivering: true,
        countsBlocked: false, sign: -1, &result)
    }
  }
}
