import FanoutIndex
import FanoutModel

/// The contract's rule chain, written once. `Evaluator` calls it for each
/// pair, and for each group of alike members of a channel share; `explain`
/// narrates what it decides.
///
/// Rules 1–3 decide from the pair's resolved inputs — whether its time is
/// snoozed, in do-not-disturb or neither, its five settings bits, the
/// message's kind and force, and whether it names the member — and hand a
/// delivered pair's trigger to the gateway gate (rules 4 and 5, in
/// `gateRule`), which the caller applies per device.
extension Evaluator {
  /// The time rules' view of a pair at the message's instant; the raw
  /// values number the time states of `ChannelShare`'s groups.
  enum TimeState: Int {
    case free = 0
    case snoozed = 1
    case dnd = 2
  }

  /// Rules 1–3 for one pair: the reason it is suppressed, or the trigger
  /// it goes on to the gateway gate with.
  ///
  /// - Parameters:
  ///   - time: the pair's time state; with `force` it does not count.
  ///   - mentioned: the member is named (mentions, reply_to) or the message
  ///     is for all members (mention_all) — before `mention_notifications`.
  @inline(__always)
  static func decide(
    _ time: TimeState, force: Bool, _ settings: MemberSettings, _ kind: MessageKind,
    mentioned: Bool
  ) -> (reason: Reason?, trigger: Trigger) {
    if !force {
      switch time {
      case .snoozed: return (.snoozed, .message)
      case .dnd: return (.dnd, .message)
      case .free: break
      }
    }
    return levelRule(settings, kind, mentioned: settings.mentionNotifications && mentioned)
  }

  /// Rule 3: muted / not_mentioned by kind and level, or the trigger.
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

  /// Rules 4 and 5, once the gate has judged each of the member's devices:
  /// no device, or none passed.
  @inline(__always)
  static func gateRule(devices: Int, passed: Int) -> Reason? {
    devices == 0 ? .noDevice : passed == 0 ? .optedOut : nil
  }
}
