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
  /// of `batch`, by an evaluator of this one's index), as `evaluatePair` would have: a throttled pair is one
  /// delivered with trigger 'message', so it passed the gateway gate; its
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
    precondition(
      result.delivered.ends.count == messages.count, "outcomes and delivered pairs recorded")
    guard !throttled.starts.isEmpty else { return }
    let c = columns
    var pairStart = 0
    var deliveredStart = 0
    for (k, m) in messages.enumerated() {
      let pairEnd = Int(result.messagePairEnds[k])
      let deliveredEnd = Int(result.delivered.ends[k])
      defer { (pairStart, deliveredStart) = (pairEnd, deliveredEnd) }
      let users = throttled.users(of: m)
      guard !users.isEmpty else { continue }
      let ts = batch.ts[m]
      let category = Int(batch.category[m])
      // Both lists, and the throttled users, ascend by user row.
      var i = pairStart
      var d = deliveredStart
      for u in users {
        while i < pairEnd && result.pairUsers[i] != u { i &+= 1 }
        while d < deliveredEnd && result.delivered.users[d] != u { d &+= 1 }
        precondition(
          i < pairEnd && d < deliveredEnd && result.pairOutcomes[i] == .delivered(.message),
          "rule 8 throttles only pairs delivered with trigger 'message'")
        result.pairOutcomes[i] = .suppressed(.throttled)
        result.pairDeliveryHours[i] = UInt8(LocalTime.utcHour(millis: ts))
        result.counters.delivered -= 1
        result.counters.suppressed[Int(Reason.throttled.rawValue)] += 1
        if result.delivered.deliverAt[d] > ts { result.counters.deferred -= 1 }
        let state = c.userState[Int(u)]
        for k in 0..<c.deviceCount(user: Int(u), state) {
          let (g, restricted) = c.deviceGate(k, state)
          if passesGate(gateway: g, restricted: restricted, user: Int(u), state, category: category)
          {
            result.counters.deliveries[g] -= 1
          }
        }
      }
    }
  }
}
