import FanoutIndex
import FanoutModel

/// The contract's rule chain, written once. `Evaluator` calls it for each
/// pair, and for each group of alike members of a channel share; `explain`
/// narrates what it decides.
///
/// Rules 0–4 decide from the message's terms, the pair's own terms (named,
/// muting the sender, a thread level), its time state and its settings
/// bits, and hand a delivered pair's trigger to the gateway gate (rules 6
/// and 7, in `gateRule`), which the caller applies per device.
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

    /// A member the message does not single out.
    static let plain = PairTerms()
  }

  /// Rules 0–4 for one pair: the reason it is suppressed, or the trigger
  /// it goes on to the gateway gate with.
  ///
  /// - Parameter time: the pair's time state; with `force` it does not count.
  @inline(__always)
  static func decide(
    _ time: TimeState, _ terms: Terms, _ pair: PairTerms, _ memberSettings: MemberSettings
  ) -> (reason: Reason?, trigger: Trigger) {
    if terms.silent { return (.silent, .message) }
    if pair.mutedSender { return (.senderMuted, .message) }
    if !terms.force {
      switch time {
      case .snoozed: return (.snoozed, .message)
      case .dnd: return (.dnd, .message)
      case .free: break
      }
    }
    var settings = memberSettings
    if let level = pair.threadLevel { settings = settings.with(chatLevel: level) }
    let mentioned =
      settings.mentionNotifications
      && (pair.named || (terms.mentionAll && settings.mentionAllNotifications))
    return levelRule(settings, terms.kind, mentioned: mentioned)
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
}
