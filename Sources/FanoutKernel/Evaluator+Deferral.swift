import FanoutIndex
import FanoutTime

/// Deferral (contract v2, section 5.3): the first instant at or after a
/// message's ts at which no snooze window of the pair's levels holds and the
/// user's local (weekday, minute) lies in no DND window — within 7 days.
///
/// Computed from the windows, not minute by minute: a snooze window moves
/// the candidate to its end; a DND minute moves it to the start of the next
/// free minute of the week (a word-wise search of the pattern's bits), or to
/// the zone's next offset change if that comes first, where the local clock
/// jumps (so a window ending at 02:30 on a spring-forward night ends at the
/// transition, and a fall-back night's repeated hour is in the window twice).
/// One step of a deferral: a snooze window or DND that held from `from`
/// and moved the candidate instant to `to`.
public struct DeferralStep: Sendable, Equatable {
  public var snoozed: Bool
  public var from: Int64
  public var to: Int64
}

extension Evaluator {
  /// The longest a pair is deferred: seven days, in milliseconds.
  static let deferralHorizon: Int64 = 604_800_000

  /// The deferred delivery instant, or nil when there is none within the
  /// horizon. `snooze` is the slot's snooze group (or -1).
  func deferral(_ ts: Int64, snooze: Int32, _ state: UserState) -> Int64? {
    // Without snooze windows the answer depends on the DND pattern and the
    // zone only: computed once per message for each such pair of them.
    guard snooze < 0 else { return firstFreeInstant(ts, snooze: snooze, state) }
    let key = Int64(state.dnd) << 16 | Int64(state.zone)
    let entry = Int((UInt64(bitPattern: key) &* 0x9E37_79B9_7F4A_7C15) >> 58)
    if deferralStamp[entry] == stamp && deferralKey[entry] == key {
      let cached = deferralValue[entry]
      return cached == .min ? nil : cached
    }
    let value = firstFreeInstant(ts, snooze: -1, state)
    deferralStamp[entry] = stamp
    deferralKey[entry] = key
    deferralValue[entry] = value ?? .min
    return value
  }

  /// The deferral instant, stepping from window to window; `record` (for
  /// `explain`) is told each step.
  func firstFreeInstant(
    _ ts: Int64, snooze: Int32, _ state: UserState, record: ((DeferralStep) -> Void)? = nil
  ) -> Int64? {
    let limit = ts.addingSaturated(Self.deferralHorizon)
    let c = columns
    var t = ts
    // Each step moves past a snooze window, to a free minute, or to an
    // offset change: a few steps in practice; the cap only guards the loop.
    for _ in 0..<100_000 {
      if t >= limit { return nil }
      if snooze >= 0, let end = snoozeEnd(group: snooze, holding: t) {
        record?(DeferralStep(snoozed: true, from: t, to: end))
        t = end
        continue
      }
      let pattern = Int(state.dnd)
      if pattern < 0 { return t }
      let zone = index.zones[Int(state.zone)]
      let span = zone.offsetSpan(atMillis: t)
      let offsetMillis = Int64(span.offset) &* 1000
      let minute = LocalTime.minuteOfWeek(utcMillis: t, offsetSeconds: span.offset)
      let words = UnsafeBufferPointer(
        rebasing: c.dndWords[
          (pattern &* DNDPattern.wordCount)..<((pattern &+ 1) &* DNDPattern.wordCount)])
      if words[minute &>> 6] & (1 &<< UInt64(minute & 63)) == 0 { return t }
      guard let ahead = Self.minutesToFreeMinute(words, from: minute) else { return nil }
      // The start of that local minute, while the offset holds.
      let localMinuteStart = LocalTime.floorDiv(t &+ offsetMillis, 60_000) &* 60_000
      let next = localMinuteStart &+ Int64(ahead) &* 60_000 &- offsetMillis
      let moved = next >= span.until ? span.until : next
      guard moved > t else { return nil }  // only at the ends of the 64-bit range
      record?(DeferralStep(snoozed: false, from: t, to: moved))
      t = moved
    }
    return nil
  }

  /// The end of the snooze window of `group` that holds `t`, the latest if
  /// several do; nil when none does.
  private func snoozeEnd(group: Int32, holding t: Int64) -> Int64? {
    let c = columns
    var end: Int64? = nil
    for w in Int(c.snoozeGroups[Int(group)])..<Int(c.snoozeGroups[Int(group) + 1])
    where c.snoozeBounds[2 * w] <= t && t < c.snoozeBounds[2 * w + 1] {
      end = max(end ?? .min, c.snoozeBounds[2 * w + 1])
    }
    return end
  }

  /// How many minutes after `minute` of the week (cyclically) the first
  /// minute outside the pattern is; nil when the pattern holds the whole week.
  static func minutesToFreeMinute(_ words: UnsafeBufferPointer<UInt64>, from minute: Int) -> Int? {
    let week = LocalTime.minutesPerWeek
    var m = minute &+ 1
    var scanned = 1
    while scanned < week {
      if m == week { m = 0 }
      let word = m &>> 6
      // Free minutes are zero bits; the last word's bits past the week are zero too,
      // but never reached: `m` wraps at the week's end.
      let bits = ~words[word] &>> UInt64(m & 63)
      let validBits = min(64 &- (m & 63), week &- m)
      let masked = validBits == 64 ? bits : bits & ((1 &<< UInt64(validBits)) &- 1)
      if masked != 0 {
        let k = masked.trailingZeroBitCount
        return scanned &+ k
      }
      scanned &+= validBits
      m &+= validBits
    }
    return nil
  }
}
