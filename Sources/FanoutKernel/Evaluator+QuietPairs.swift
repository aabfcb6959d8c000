import FanoutIndex
import FanoutModel

/// A what-if variant that changes only the default quiet action (defer
/// instead of drop) changes only the pairs A dropped in quiet time: a pair
/// outside quiet time never reads its quiet action, and a user who
/// deferred under A defers under B too. Such a side starts from A's
/// outcomes and decides those pairs again, instead of every pair.
extension Evaluator {
  /// Decides again, against this index, the pairs `result` holds as
  /// suppressed `snoozed` or `dnd`: `result` is `messages` of `batch` as
  /// an evaluator of another index recorded them (`.outcomes`), one whose
  /// rules differ from this index's only in the users' quiet actions and
  /// defer no one this index does not (`Index.defersMoreThan`). Each such
  /// pair's suppression is taken back and the pair counted as this index
  /// decides it; its outcome and delivery hour become this index's.
  ///
  /// - Complexity: O(pairs of the messages) to find them, and the rules
  ///   for each pair found.
  public func redecideQuietPairs(
    _ batch: MessageBatch, messages: Range<Int>, in result: inout ChunkResult
  ) {
    let snoozed = Outcome.suppressed(.snoozed)
    let dnd = Outcome.suppressed(.dnd)
    batch.mentions.withUnsafeBufferPointer { mentions in
      var start = 0
      for (k, m) in messages.enumerated() {
        let end = Int(result.messagePairEnds[k])
        defer { start = end }
        guard
          let first = (start..<end).first(where: {
            result.pairOutcomes[$0] == snoozed || result.pairOutcomes[$0] == dnd
          })
        else { continue }
        stamp += 1  // a new message for the zones' and deferrals' caches
        let channel = Int(batch.channel[m])
        let members = columns.channelMembers[channel]..<columns.channelMembers[channel + 1]
        let terms = terms(batch, m, channel: channel)
        var singled = singledOut(batch, m, channel, mentions, .empty)
        for i in first..<end {
          let before = result.pairOutcomes[i]
          guard before == snoozed || before == dnd else { continue }
          let u = result.pairUsers[i]
          guard let slot = slot(of: u, in: members) else {
            preconditionFailure("a pair's user is a member of its message's channel")
          }
          let verdict = evaluatePair(slot, u, terms, singled.terms(for: u), sign: 1, &result)
          scratch.suppressed[
            Int(before == snoozed ? Reason.snoozed.rawValue : Reason.dnd.rawValue)] &-= 1
          if verdict.reason == nil { result.counters.delivered += 1 }
          (result.pairOutcomes[i], result.pairDeliveryHours[i]) = Self.outcome(
            verdict, ts: terms.ts)
        }
      }
    }
    moveScratchCounters(into: &result)
  }
}
