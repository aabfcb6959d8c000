import CPrefetch
import FanoutModel

/// Delivery lines (and decision lines) written, and counted, from the pass
/// before the ledgers.
/// With a throttle or notification groups, every chunk is evaluated once
/// before the ledgers (without rule 8), keeping its pairs delivered so far;
/// once the ledgers have judged, only rule 8 can still take one of those
/// pairs away, and no other pair can become delivered. So the lines are
/// written from those pairs alone (decision lines from the outcomes the
/// pass kept), and counting only, the pass's counts need only rule 8's
/// verdicts, instead of deciding every pair of every message again: most
/// pairs of chat traffic are suppressed.
extension Evaluator {
  /// Writes the delivery lines of `messages` of `batch` (with lines on),
  /// and their decision lines (with decisions on), and counts them, as
  /// `evaluateMessages` would: `passed` is those messages as an evaluator
  /// of this index evaluated them without rule 8 (`.deliveredPairs`: its
  /// counters, and each message's delivered pairs in member order; with
  /// decisions, `.outcomesAndDeliveredPairs`: every pair's outcome too);
  /// `throttled` is what rule 8 found for the batch. A throttled pair is
  /// taken back (`takeBackThrottled`).
  ///
  /// - Complexity: with lines, O(delivered pairs + deliveries), and
  ///   O(pairs) with decisions; counting only, O(delivered pairs of the
  ///   messages with a throttled member).
  func writeDelivered(
    _ batch: MessageBatch, _ messages: Range<Int>, passed: ChunkResult,
    throttled: ThrottledMembers, _ result: inout ChunkResult
  ) {
    precondition(
      passed.delivered.ends.count == messages.count, "the pass's delivered pairs, per message")
    precondition(
      !writeDecisions || passed.messagePairEnds.count == messages.count,
      "with decisions, the pass's outcomes")
    var counters = passed.counters
    if writeLines {
      // (Counted again as they are written: a throttled pair's are not.)
      for g in counters.deliveries.indices { counters.deliveries[g] = 0 }
    }
    result.counters.add(counters)
    let c = columns
    let pairs = passed.delivered
    let count = pairs.users.count
    throttled.users.withUnsafeBufferPointer { throttledUsers in
      var start = 0
      var pairStart = 0
      for (k, m) in messages.enumerated() {
        if writeLines { prefetchChannelNames(batch.channel, ahead: m, end: messages.upperBound) }
        let end = Int(pairs.ends[k])
        let pairEnd = writeDecisions ? Int(passed.messagePairEnds[k]) : 0
        defer { (start, pairStart) = (end, pairEnd) }
        var throttledHere =
          throttled.starts.isEmpty
          ? SortedCursor.empty
          : SortedCursor(throttledUsers, Int(throttled.starts[m])..<Int(throttled.starts[m &+ 1]))
        guard
          pairStart < pairEnd || (start < end && (writeLines || throttledHere.head != nil))
        else { continue }
        stamp &+= 1  // a new message for the gateways' lines
        if writeLines { buildLinePrefix(batch, m, Int(batch.channel[m])) }
        if writeDecisions { buildDecisionPrefix(batch, m) }
        if writesNotes { noteCursor = Int(notes.starts[m])..<Int(notes.starts[m &+ 1]) }
        let ts = batch.ts[m]
        let category = Int(batch.category[m])
        // With decisions: the next of the message's pairs without its line.
        var p = pairStart
        /// The decision lines of the pairs the pass suppressed, up to user row `u`.
        func decideSuppressed(before u: Int32) {
          while p < pairEnd && passed.pairUsers[p] != u {
            guard let reason = passed.pairOutcomes[p].reason else {
              preconditionFailure("a pair the pass delivered is among its delivered pairs")
            }
            appendDecision(
              user: Int(passed.pairUsers[p]),
              Verdict(reason: reason, trigger: .message, deliverAt: ts), ts: ts, &result)
            p &+= 1
          }
        }
        for i in start..<end {
          if writeLines {
            // The user records and member settings, then where their devices
            // lie, then the devices.
            if i &+ Self.membersAhead < count {
              cprefetch_read(c.userState.baseAddress! + Int(pairs.users[i &+ Self.membersAhead]))
              cprefetch_read(
                c.memberSettings.baseAddress! + Int(pairs.slots[i &+ Self.membersAhead]))
            }
            if i &+ Self.deviceOffsetsAhead < count {
              prefetchDeviceOffsets(user: Int(pairs.users[i &+ Self.deviceOffsetsAhead]))
            }
            if i &+ Self.deviceLinesAhead < count {
              prefetchDeviceLines(user: Int(pairs.users[i &+ Self.deviceLinesAhead]))
            }
          }
          let u = pairs.users[i]
          var verdict = Verdict(
            reason: nil, trigger: pairs.triggers[i], deliverAt: pairs.deliverAt[i])
          findPairNote(u)
          var pair = PairTerms()
          pair.throttled = throttledHere.seek(u) != nil
          if Self.isThrottled(pair, verdict.trigger) {
            // (With lines on, the pass's deliveries are not counted: see above.)
            takeBackThrottled(
              user: u, deliverAt: verdict.deliverAt, ts: ts, category: category,
              deliveriesCounted: !writeLines, &result)
            verdict.reason = .throttled
          } else if writeLines {
            makeRecipientTail(
              trigger: verdict.trigger,
              preview: c.memberSettings[Int(pairs.slots[i])].showPreview,
              deferredTo: verdict.deliverAt > ts ? verdict.deliverAt : nil)
            _ = gateDevices(
              user: u, c.userState[Int(u)], category: category, delivering: true,
              countsBlocked: false, sign: 1, &result)
          }
          if writeDecisions {
            decideSuppressed(before: u)
            appendDecision(user: Int(u), verdict, ts: ts, &result)
            p &+= 1
          }
        }
        if writeDecisions { decideSuppressed(before: -1) }
        if writeLines { closeGatewayLines(&result) }
      }
    }
  }
}
