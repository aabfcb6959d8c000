import CPrefetch
import FanoutIndex
import FanoutModel

/// A what-if variant that changes only the default quiet action (defer
/// instead of drop) changes only the pairs A dropped in quiet time: a pair
/// outside quiet time never reads its quiet action, and a user who
/// deferred under A defers under B too. Such a side starts from A's
/// outcomes and decides those pairs again, instead of every pair.
extension Evaluator {
  /// Decides again, against this index, the pairs of `messages` of
  /// `batch` that `decidedByA` holds as suppressed `snoozed` or `dnd`:
  /// `decidedByA` is them as an evaluator of another index recorded them
  /// (`.outcomes`), one whose rules differ from this index's only in the
  /// users' quiet actions and defer no one this index does not
  /// (`Index.defersMoreThan`). Each such pair's suppression is taken back
  /// and the pair counted as this index decides it; if its outcome or
  /// delivery hour differ, it is listed in `result.redecidedPairs`
  /// (`result` holds only the messages' pair ends beside them: every pair
  /// not listed is `decidedByA`'s, whose counters `result`'s then lack).
  ///
  /// - Complexity: O(pairs of the messages) to find them, and the rules
  ///   for each pair found.
  public func redecideQuietPairs(
    _ batch: MessageBatch, messages: Range<Int>, decidedBy decidedByA: ChunkResult,
    into result: inout ChunkResult
  ) {
    let snoozed = Outcome.suppressed(.snoozed)
    let dnd = Outcome.suppressed(.dnd)
    batch.mentions.withUnsafeBufferPointer { mentions in
      var start = 0
      for (k, m) in messages.enumerated() {
        let end = Int(decidedByA.messagePairEnds[k])
        defer { start = end }
        result.messagePairEnds.append(decidedByA.messagePairEnds[k])
        guard
          let first = (start..<end).first(where: {
            decidedByA.pairOutcomes[$0] == snoozed || decidedByA.pairOutcomes[$0] == dnd
          })
        else { continue }
        stamp += 1  // a new message for the zones' and deferrals' caches
        let channel = Int(batch.channel[m])
        let members = columns.channelMembers[channel]..<columns.channelMembers[channel + 1]
        let terms = terms(batch, m, channel: channel)
        var singled = singledOut(batch, m, channel, mentions, .empty)
        for i in first..<end {
          let before = decidedByA.pairOutcomes[i]
          guard before == snoozed || before == dnd else { continue }
          let u = decidedByA.pairUsers[i]
          guard let slot = slot(of: u, in: members) else {
            preconditionFailure("a pair's user is a member of its message's channel")
          }
          let verdict = evaluatePair(slot, u, terms, singled.terms(for: u), sign: 1, &result)
          scratch.suppressed[
            Int(before == snoozed ? Reason.snoozed.rawValue : Reason.dnd.rawValue)] &-= 1
          if verdict.reason == nil { result.counters.delivered += 1 }
          let (outcome, deliveryHour) = Self.outcome(verdict, ts: terms.ts)
          result.listRedecided(i, of: decidedByA, outcome, deliveryHour: deliveryHour)
        }
      }
    }
    moveScratchCounters(into: &result)
  }
}

/// A what-if variant that changes only users' quiet hours (new DND
/// windows, other quiet actions) changes only the pairs of those users at
/// instants where their quiet hours differ: every other pair's rules read
/// the same columns. Such a side takes A's outcomes and decides those
/// pairs again, instead of every pair.
extension Evaluator {
  /// Decides again, against this index, each pair of `messages` of
  /// `batch` (as `a` decided them in `decidedByA`) of a user `change`
  /// names whose time state differs between the two indexes at the
  /// message's ts — or, for a user who defers on either side, is quiet on
  /// either side (the instant a deferral ends follows the schedule). Such
  /// a pair is taken out of the counts as `a` decides it and counted as
  /// this index does; if its outcome or delivery hour differ from `a`'s,
  /// it is listed in `result.redecidedPairs` (`result` holds only the
  /// messages' pair ends beside them: every pair not listed is `a`'s).
  /// This evaluator's index must differ from `a`'s only in quiet hours
  /// (`QuietHoursChange`), and `a`'s scratch counts be empty.
  ///
  /// `result`'s counters gain only these differences: once the chunk is
  /// done, add `decidedByA`'s to them.
  ///
  /// - Complexity: O(pairs) to find the pairs (a code per pair, two
  ///   schedule lookups per pair of a changed user), and the rules at most
  ///   twice for each pair found.
  public func redecideQuietHours(
    _ batch: MessageBatch, messages: Range<Int>, decidedBy a: Evaluator,
    _ decidedByA: ChunkResult, change: QuietHoursChange, into result: inout ChunkResult
  ) {
    let c = columns
    let userStateOfA = a.columns.userState
    change.withCodes { codes in
      // A's user records and the codes, asked for ahead: within a
      // message 8 members ahead; for later messages, as a whole
      // evaluation does (`prefetchMessageStarts`, with A's terms: A's
      // are taken), and their first slots' snoozes 4 ahead and first
      // members 2 ahead (a chunk's messages are long gone from the cache
      // since A decided them).
      func prefetchUsers(_ slots: Range<Int>) {
        for slot in slots {
          let u = Int(c.memberUser[slot])
          cprefetch_read(codes.baseAddress! + u)
          cprefetch_read(userStateOfA.baseAddress! + u)
        }
      }
      func prefetchMessages(after m: Int) {
        let end = messages.upperBound
        prefetchMessageStarts(batch.channel, batch.sender, ahead: m, end: end, terms: a.columns)
        if m &+ 4 < end, let snoozes = c.memberSnooze.baseAddress {
          cprefetch_read(snoozes + c.channelMembers[Int(batch.channel[m &+ 4])])
        }
        if m &+ 2 < end {
          prefetchUsers(leadingSlots(of: batch.channel[m &+ 2], Self.membersAhead))
        }
      }
      batch.mentions.withUnsafeBufferPointer { mentions in
        for m in messages {
          prefetchMessages(after: m)
          let k = result.messagePairEnds.count
          let end = Int(decidedByA.messagePairEnds[k])
          let pairs = (k == 0 ? 0 : Int(decidedByA.messagePairEnds[k &- 1]))..<end
          result.messagePairEnds.append(decidedByA.messagePairEnds[k])
          // Force and silent messages never read quiet hours.
          guard !batch.force[m] && !batch.silent[m] && !pairs.isEmpty else { continue }
          stamp &+= 1  // a new message for the zones' and deferrals' caches
          a.stamp &+= 1
          let channel = Int(batch.channel[m])
          let members = c.channelMembers[channel]..<c.channelMembers[channel + 1]
          let (ts, sender) = (batch.ts[m], batch.sender[m])
          // What the rules need, made for the message's first pair found.
          var found: (terms: Terms, singled: SingledOut)? = nil
          var i = pairs.lowerBound
          for slot in members {
            let ahead = slot &+ Self.membersAhead
            if ahead < members.upperBound { prefetchUsers(ahead..<ahead &+ 1) }
            let u = c.memberUser[slot]
            if u == sender { continue }
            defer { i &+= 1 }
            let code = codes[Int(u)]
            guard code != 0 else { continue }
            // Rule 1 (sender_muted) decides before the time rules, alike.
            if decidedByA.pairOutcomes[i] == .suppressed(.senderMuted) { continue }
            let stateOfA = userStateOfA[Int(u)]
            let (pattern, defers) =
              code == QuietHoursChange.elsewhere
              ? (c.userState[Int(u)].dnd, c.userState[Int(u)].defers) : change.quietHours(code)
            let settings = c.memberSettings[slot]
            let snoozed = settings.hasSnooze && isSnoozed(group: c.memberSnooze[slot], ts)
            let quietForA = snoozed || a.isInDND(stateOfA, ts)
            let quiet = snoozed || isInDND(pattern: pattern, zone: stateOfA.zone, ts)
            let differs = stateOfA.defers || defers ? quietForA || quiet : quietForA != quiet
            guard differs else { continue }
            if found == nil {
              // (A's terms are this index's, the settings being the same,
              // and in cache: A just decided the message.)
              found = (
                a.terms(batch, m, channel: channel),
                a.singledOut(batch, m, channel, mentions, .empty)
              )
            }
            let terms = found!.terms
            let pair = found!.singled.terms(for: u)
            // A's decision taken back: a pair dropped in quiet time counted
            // its reason alone; any other is decided again, counted −1.
            let before = decidedByA.pairOutcomes[i]
            if let reason = before.reason, reason == .snoozed || reason == .dnd {
              scratch.suppressed[Int(reason.rawValue)] &-= 1
            } else {
              _ = a.evaluatePair(slot, u, terms, pair, sign: -1, &result)
            }
            // This side's: a pair it drops in quiet time (rules 2 and 3; a
            // call is never deferred) reads nothing more.
            let after: Verdict
            if quiet && (!defers || terms.kind == .call) {
              after = Verdict(
                reason: snoozed ? .snoozed : .dnd, trigger: .message, deliverAt: ts)
              scratch.suppressed[Int(after.reason!.rawValue)] &+= 1
            } else {
              after = evaluatePair(slot, u, terms, pair, sign: 1, &result)
            }
            result.counters.delivered &+=
              (after.reason == nil ? 1 : 0) &- (before.isDelivered ? 1 : 0)
            let (outcome, deliveryHour) = Self.outcome(after, ts: ts)
            result.listRedecided(i, of: decidedByA, outcome, deliveryHour: deliveryHour)
          }
        }
      }
    }
    a.moveScratchCounters(into: &result)
    moveScratchCounters(into: &result)
  }
}
