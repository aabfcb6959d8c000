import FanoutIndex
import FanoutModel

/// The contract's rule chain, written once. `Evaluator` calls it for each
/// pair, and for each group of alike members of a channel share; `explain`
/// narrates what it decides.
///
/// Rules 0–5 decide from the message's terms, the pair's own terms (named,
/// muting the sender, a thread level), its time state and its settings
/// bits — asking the caller, only where it matters, for the instant a
/// deferral would deliver at and whether the user is active — and hand a
/// delivered pair's trigger and delivery time to the gateway gate (rules 6
/// and 7, in `gateRule`), which the caller applies per device, then to
/// rule 8 (`isThrottled`), whose verdicts a `ThrottleLedger` found in input
/// order before the message was evaluated.
extension Evaluator {
  /// The time rules' view of a pair at the message's instant; the raw
  /// values number the time states of `ChannelShare`'s groups.
  enum TimeState: Int {
    case free = 0
    case snoozed = 1
    case dnd = 2
  }

  /// What a message asks of every member of its channel.
  struct Terms {
    let ts: Int64
    let kind: MessageKind
    let force: Bool
    let silent: Bool
    /// mention_all, where the channel's size lets it apply.
    let mentionAll: Bool
    let category: Int

    /// Whether the time rules can decide a pair of this message: not when
    /// force bypasses them or rule 0 decides every pair first.
    var timeMatters: Bool { !force && !silent }
  }

  /// What a message asks of one member beyond its terms.
  struct PairTerms {
    /// In mentions, or reply_to.
    var named = false
    /// Has a `user_mutes` row for the sender.
    var mutedSender = false
    /// The member's `thread_prefs` level for the message's thread.
    var threadLevel: Level? = nil
    /// Rule 8 found enough earlier deliveries to throttle a 'message' pair.
    var throttled = false

    /// A member the message does not single out.
    static let plain = PairTerms()
  }

  /// What rules 0–5 make of a pair: the reason it is suppressed, or the
  /// trigger and the delivery time it goes on to the gateway gate with.
  struct Verdict {
    var reason: Reason?
    var trigger: Trigger
    /// The message's ts, unless deferral or presence set a later instant.
    var deliverAt: Int64
  }

  /// Rules 0–5 for one pair.
  ///
  /// - Parameters:
  ///   - time: the pair's time state; with `force` it does not count.
  ///   - deferredUntil: for a pair that snooze or DND would drop and whose
  ///     user defers: the first free instant within 7 days, or nil.
  ///   - isActive: whether the user is in a presence window at ts.
  @inline(__always)
  static func decide(
    _ time: TimeState, _ terms: Terms, _ pair: PairTerms, _ settings: MemberSettings,
    presence: PresencePolicy, deferredUntil: () -> Int64?, isActive: () -> Bool
  ) -> Verdict {
    var verdict = decide(time, terms, pair, settings, deferredUntil: deferredUntil)
    // Rule 5: presence, at ts, for any kind but calls.
    guard verdict.reason == nil, presence.action != .ignore, terms.kind != .call, isActive()
    else { return verdict }
    if presence.action == .suppress {
      return Verdict(reason: .active, trigger: .message, deliverAt: terms.ts)
    }
    let delayed = terms.ts.addingReportingOverflow(presence.delayMilliseconds)
    verdict.deliverAt = max(verdict.deliverAt, delayed.overflow ? .max : delayed.partialValue)
    return verdict
  }

  /// Rules 0–4 for one pair (presence aside, as a channel share's groups
  /// have none).
  @inline(__always)
  static func decide(
    _ time: TimeState, _ terms: Terms, _ pair: PairTerms, _ memberSettings: MemberSettings,
    deferredUntil: () -> Int64? = { nil }
  ) -> Verdict {
    if terms.silent { return Verdict(reason: .silent, trigger: .message, deliverAt: terms.ts) }
    if pair.mutedSender {
      return Verdict(reason: .senderMuted, trigger: .message, deliverAt: terms.ts)
    }
    var deliverAt = terms.ts
    if !terms.force && time != .free {
      // Calls are never deferred: a call rung hours later is of no use.
      if terms.kind != .call, let t = deferredUntil() {
        deliverAt = t
      } else {
        return Verdict(
          reason: time == .snoozed ? .snoozed : .dnd, trigger: .message, deliverAt: terms.ts)
      }
    }
    var settings = memberSettings
    if let level = pair.threadLevel { settings = settings.with(chatLevel: level) }
    let mentioned =
      settings.mentionNotifications
      && (pair.named || (terms.mentionAll && settings.mentionAllNotifications))
    let (reason, trigger) = levelRule(settings, terms.kind, mentioned: mentioned)
    return Verdict(reason: reason, trigger: trigger, deliverAt: deliverAt)
  }

  /// `presence_action` and `presence_delay_ms`, as the rules read them.
  struct PresencePolicy {
    let action: PresenceAction
    let delayMilliseconds: Int64

    init(_ settings: AppSettings) {
      action = settings.presenceAction ?? .ignore
      delayMilliseconds = settings.presenceDelay
    }
  }

  /// Rule 4: muted / not_mentioned by kind and level, or the trigger.
  @inline(__always)
  static func levelRule(_ settings: MemberSettings, _ kind: MessageKind, mentioned: Bool)
    -> (reason: Reason?, trigger: Trigger)
  {
    switch kind {
    case .call:
      return settings.callsOn ? (nil, .call) : (.muted, .message)
    case .pinned where settings.pinnedNotifications:
      return settings.chatLevel == .none ? (.muted, .message) : (nil, .pinned)
    case .message, .pinned:
      switch settings.chatLevel {
      case .all: return (nil, mentioned ? .mention : .message)
      case .mentions: return mentioned ? (nil, .mention) : (.notMentioned, .message)
      case .none: return (.muted, .message)
      }
    }
  }

  /// Rules 6 and 7, once the gate has judged each of the member's devices:
  /// no device, or none passed.
  @inline(__always)
  static func gateRule(devices: Int, passed: Int) -> Reason? {
    devices == 0 ? .noDevice : passed == 0 ? .optedOut : nil
  }

  /// Rule 8 for a pair that reached the gateway gate with `trigger`: only
  /// 'message' pairs are throttled (mentions, pinned messages and calls
  /// never are).
  @inline(__always)
  static func isThrottled(_ pair: PairTerms, _ trigger: Trigger) -> Bool {
    pair.throttled && trigger == .message
  }
}
