import FanoutIndex
import FanoutModel

/// Everything the rule chain looks at for one pair — each check made even
/// where an earlier rule decided, so that a reader sees what would have
/// happened next — and the chain's own verdict. `fanout explain` puts it
/// into words; it decides nothing itself.
public struct PairInspection: Sendable {
  public enum Pair: Sendable, Equatable {
    case evaluated
    /// The user is not a member of the channel: no pair.
    case notMember
    /// The user sent the message: senders are never notified.
    case sender
  }

  public var pair: Pair
  /// Rule 1: the user has a `user_mutes` row for the sender.
  public var mutedSender = false
  /// Rules 2 and 3 at the message's ts (force aside).
  public var snoozed = false
  public var inDND = false
  /// The user's local (weekday 1–7, minute of the day) at ts, as rule 3
  /// reads it.
  public var localWeekday = 1
  public var localMinute = 0
  /// Deferral, for a user whose quiet action is 'defer' and a message that
  /// is neither forced nor a call: the first free instant (nil: none within
  /// 7 days), and the windows that moved it.
  public var defers = false
  public var deferralInstant: Int64?
  public var deferralSteps: [DeferralStep] = []
  /// Rule 4: how the user is named, and the level rule's verdict (the
  /// trigger is the kind's even when muted).
  public var named = false
  public var mentionAllApplies = true
  public var mentionAllCounts = false
  public var mentioned = false
  public var levelReason: Reason?
  public var trigger = Trigger.message
  /// Rule 5: ts lies in one of the user's presence windows, and the rule
  /// applies to it (presence in force, not a call).
  public var inPresenceWindow = false
  public var active = false
  /// Rules 6 and 7: each device's gateway row and gate verdict, by device id.
  public var devices: [(gateway: Int, verdict: GateVerdict)] = []
  /// Rule 8: whether enough earlier deliveries were counted (the caller's
  /// count; see `Evaluator.reachesLimit`).
  public var throttleCounted = false
  /// The chain's verdict: the reason, or the trigger and delivery time.
  public var reason: Reason?
  public var deliverAt: Int64 = 0

  /// Whether snooze or DND would suppress the pair (force aside).
  public var quiet = false

  /// The rule that decided a suppressed pair.
  public var decidedBy: Rule? { reason.map(Rule.init(deciding:)) }
}

extension Evaluator {
  /// The rule chain for user row `u` on message `m` of `batch`, observed:
  /// the verdict is `evaluatePair`'s, the checks beside it the same rule
  /// functions'. `throttleCounted`: rule 8 found enough earlier deliveries
  /// for this pair (from the caller's replay of the earlier lines).
  public func inspect(_ batch: MessageBatch, _ m: Int, user u: Int32, throttleCounted: Bool)
    -> PairInspection
  {
    stamp += 1
    let c = columns
    let channel = Int(batch.channel[m])
    let members = c.channelMembers[channel]..<c.channelMembers[channel + 1]
    guard let slot = slot(of: u, in: members) else { return PairInspection(pair: .notMember) }
    if batch.sender[m] == u { return PairInspection(pair: .sender) }
    let terms = terms(batch, m, channel: channel)
    var inspection = PairInspection(pair: .evaluated)
    let throttledUsers = [u]
    let pair = batch.mentions.withUnsafeBufferPointer { mentions in
      throttledUsers.withUnsafeBufferPointer { throttled in
        var singled = singledOut(
          batch, m, channel, mentions, SortedCursor(throttled, throttleCounted ? 0..<1 : 0..<0))
        return singled.terms(for: u)
      }
    }
    var result = ChunkResult(gateways: index.gateways.count)
    let verdict = evaluatePair(slot, u, terms, pair, sign: 1, &result)
    inspection.reason = verdict.reason
    inspection.trigger = verdict.trigger
    inspection.deliverAt = verdict.deliverAt
    inspection.throttleCounted = throttleCounted
    inspection.mutedSender = pair.mutedSender

    // Every check, whatever decided.
    let settings = c.memberSettings[slot]
    let state = c.userState[Int(u)]
    let snooze = settings.hasSnooze ? c.memberSnooze[slot] : -1
    inspection.snoozed = isSnoozed(group: snooze, terms.ts)
    inspection.inDND = isInDND(state, terms.ts)
    inspection.quiet = !terms.force && (inspection.snoozed || inspection.inDND)
    let minute = localMinute(zone: Int(state.zone), terms.ts)
    inspection.localWeekday = minute / 1440 + 1
    inspection.localMinute = minute % 1440
    inspection.defers = state.defers
    if state.defers && !terms.force && terms.kind != .call {
      var steps: [DeferralStep] = []
      inspection.deferralInstant = firstFreeInstant(terms.ts, snooze: snooze, state) {
        steps.append($0)
      }
      inspection.deferralSteps = steps
    }
    let levelSettings = Self.levelSettings(settings, terms, pair)
    inspection.named = pair.named
    inspection.mentionAllApplies = index.mentionAllApplies(in: channel)
    inspection.mentionAllCounts = terms.mentionAll && levelSettings.mentionAllNotifications
    inspection.mentioned =
      levelSettings.mentionNotifications && (pair.named || inspection.mentionAllCounts)
    let level = Self.levelRule(levelSettings, terms.kind, mentioned: inspection.mentioned)
    inspection.levelReason = level.reason
    if verdict.reason != nil { inspection.trigger = level.trigger }
    inspection.inPresenceWindow =
      state.hasPresence && index.presence.contains(user: Int(u), terms.ts)
    inspection.active = presencePolicy.applies(to: terms.kind) && inspection.inPresenceWindow
    for k in 0..<c.deviceCount(user: Int(u), state) {
      let (g, restricted) = c.deviceGate(k, state)
      inspection.devices.append(
        (
          g,
          gateVerdict(
            gateway: g, restricted: restricted, user: Int(u), state, category: terms.category)
        ))
    }
    return inspection
  }
}
