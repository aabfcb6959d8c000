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
      for m in messages {
        // (The messages may be the chunk's next few: `result` has the ends of those before.)
        let k = result.messagePairEnds.count
        let start = k == 0 ? 0 : Int(decidedByA.messagePairEnds[k - 1])
        let end = Int(decidedByA.messagePairEnds[k])
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
/// pairs again, instead of every pair; the sides of a sweep that are all
/// such do it in one walk over A's pairs.
extension Evaluator {
  /// Decides again, for each side of `changes` (evaluated by `sides`), each
  /// pair of `messages` of `batch` (as this evaluator, A's, decided them in
  /// `decidedByA`) of a user the side changes whose time state differs
  /// between A and the side at the message's ts — or, for a user who
  /// defers on either, is quiet on either (the instant a deferral ends
  /// follows the schedule). Such a pair is taken out of the side's counts
  /// as A decides it (by the side's `takingBack`, an evaluator of A's
  /// index, so that each side's counts stay its own) and counted as the
  /// side decides it; if its outcome or delivery hour differ from A's, it
  /// is listed in the side's `results[s].redecidedPairs` (which holds only
  /// the messages' pair ends beside them: every pair not listed is A's).
  /// Each side's index must differ from A's only in quiet hours
  /// (`QuietHoursChange`), and the `takingBack` evaluators' scratch counts
  /// be empty.
  ///
  /// Each result's counters gain only these differences: once the chunk is
  /// done, add `decidedByA`'s to them.
  ///
  /// - Complexity: O(pairs) to find the pairs (one place read per member
  ///   for all sides, two schedule lookups per side changing its user),
  ///   and the rules at most twice for each pair found.
  public func redecideQuietHours(
    _ batch: MessageBatch, messages: Range<Int>, decided decidedByA: ChunkResult,
    changes: QuietHoursChanges, sides: [Evaluator], takingBack: [Evaluator],
    into results: inout [ChunkResult]
  ) {
    let c = columns  // the sides' members, settings and zones are A's
    let userStateOfA = c.userState
    let count = sides.count
    // The sides' evaluators without reference counting in the walk (the
    // arrays hold them): retaining each per pair cost more than the walk.
    let parts = (0..<count).map {
      QuietSide(evaluator: .passUnretained(sides[$0]), takingBack: .passUnretained(takingBack[$0]))
    }
    // (Through a buffer: each side's result is reached per pair, and an
    // array's element checks its buffer is unique on every write.)
    results.withUnsafeMutableBufferPointer { results in
      parts.withUnsafeBufferPointer { parts in
        changes.withTables { codes, tables in
          // The codes and A's user records, asked for ahead: within a
          // message 8 members ahead; for later messages, as a whole
          // evaluation does (`prefetchMessageStarts`), and their first slots'
          // snoozes 4 ahead and first members 2 ahead (a chunk's messages are
          // long gone from the cache since A decided them).
          func prefetchUsers(_ slots: Range<Int>) {
            for slot in slots {
              let u = Int(c.memberUser[slot])
              cprefetch_read(codes.baseAddress! + u &* count)
              cprefetch_read(userStateOfA.baseAddress! + u)
            }
          }
          func prefetchMessages(after m: Int) {
            let end = messages.upperBound
            prefetchMessageStarts(batch.channel, batch.sender, ahead: m, end: end, terms: c)
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
              let k = results[0].messagePairEnds.count
              let end = Int(decidedByA.messagePairEnds[k])
              let pairs = (k == 0 ? 0 : Int(decidedByA.messagePairEnds[k &- 1]))..<end
              for s in 0..<count {
                results[s].messagePairEnds.append(decidedByA.messagePairEnds[k])
              }
              // Force and silent messages never read quiet hours.
              guard !batch.force[m] && !batch.silent[m] && !pairs.isEmpty else { continue }
              // A new message for the zones' and deferrals' caches.
              stamp &+= 1
              for part in parts {
                part.evaluator._withUnsafeGuaranteedRef { $0.stamp &+= 1 }
                part.takingBack._withUnsafeGuaranteedRef { $0.stamp &+= 1 }
              }
              let channel = Int(batch.channel[m])
              let members = c.channelMembers[channel]..<c.channelMembers[channel + 1]
              let (ts, sender) = (batch.ts[m], batch.sender[m])
              // What the rules need, made for the message's first pair found
              // (A's terms are every side's, the settings being the same, and
              // in cache: A just decided the message).
              var found: (terms: Terms, singled: SingledOut)? = nil
              var i = pairs.lowerBound
              for slot in members {
                let ahead = slot &+ Self.membersAhead
                if ahead < members.upperBound { prefetchUsers(ahead..<ahead &+ 1) }
                let u = c.memberUser[slot]
                if u == sender { continue }
                defer { i &+= 1 }
                let userCodes = codes.baseAddress! + Int(u) &* count
                guard (0..<count).contains(where: { userCodes[$0] != 0 }) else { continue }
                // Rule 1 (sender_muted) decides before the time rules, alike.
                let before = decidedByA.pairOutcomes[i]
                if before == .suppressed(.senderMuted) { continue }
                let stateOfA = userStateOfA[Int(u)]
                let settings = c.memberSettings[slot]
                let snoozed = settings.hasSnooze && isSnoozed(group: c.memberSnooze[slot], ts)
                let minute = localMinute(zone: Int(stateOfA.zone), ts)
                let quietForA = snoozed || isInDND(pattern: stateOfA.dnd, minute: minute)
                var pair: PairTerms? = nil
                for s in 0..<count where userCodes[s] != 0 {
                  parts[s].evaluator._withUnsafeGuaranteedRef { side in
                    let code = userCodes[s]
                    let (pattern, defers) =
                      code == QuietHoursChange.elsewhere
                      ? (side.columns.userState[Int(u)].dnd, side.columns.userState[Int(u)].defers)
                      : tables.quietHours(side: s, code)
                    let quiet = snoozed || side.isInDND(pattern: pattern, minute: minute)
                    let differs =
                      stateOfA.defers || defers ? quietForA || quiet : quietForA != quiet
                    guard differs else { return }
                    if found == nil {
                      found = (
                        terms(batch, m, channel: channel),
                        singledOut(batch, m, channel, mentions, .empty)
                      )
                    }
                    let terms = found!.terms
                    if pair == nil { pair = found!.singled.terms(for: u) }
                    // A's decision taken back: a pair dropped in quiet time
                    // counted its reason alone; any other is decided again,
                    // counted −1.
                    parts[s].takingBack._withUnsafeGuaranteedRef { back in
                      if let reason = before.reason, reason == .snoozed || reason == .dnd {
                        back.scratch.suppressed[Int(reason.rawValue)] &-= 1
                      } else {
                        _ = back.evaluatePair(slot, u, terms, pair!, sign: -1, &results[s])
                      }
                    }
                    // The side's: a pair it drops in quiet time (rules 2 and
                    // 3; a call is never deferred) reads nothing more.
                    let after: Verdict
                    if quiet && (!defers || terms.kind == .call) {
                      after = Verdict(
                        reason: snoozed ? .snoozed : .dnd, trigger: .message, deliverAt: ts)
                      side.scratch.suppressed[Int(after.reason!.rawValue)] &+= 1
                    } else {
                      after = side.evaluatePair(slot, u, terms, pair!, sign: 1, &results[s])
                    }
                    results[s].counters.delivered &+=
                      (after.reason == nil ? 1 : 0) &- (before.isDelivered ? 1 : 0)
                    let (outcome, deliveryHour) = Self.outcome(after, ts: ts)
                    results[s].listRedecided(i, of: decidedByA, outcome, deliveryHour: deliveryHour)
                  }
                }
              }
            }
          }
        }
      }
    }
    for s in 0..<count {
      takingBack[s].moveScratchCounters(into: &results[s])
      sides[s].moveScratchCounters(into: &results[s])
    }
  }
}

/// A side of `Evaluator.redecideQuietHours`: its evaluator and the one
/// that takes A's decisions of its pairs back, unretained (the caller's
/// arrays hold them).
private struct QuietSide {
  let evaluator: Unmanaged<Evaluator>
  let takingBack: Unmanaged<Evaluator>
}
