import FanoutIndex
import FanoutModel

/// The contract's rules, numbered as in its section 5.3: the rule that
/// decided a suppressed pair (`explain` names it).
public enum Rule: Int, Sendable, CaseIterable {
  case silent = 0
  case senderMuted = 1
  case snoozed = 2
  case dnd = 3
  case level = 4
  case active = 5
  case devices = 6
  case gate = 7
  case throttled = 8

  /// The rule whose reason `reason` is.
  public init(deciding reason: Reason) {
    switch reason {
    case .silent: self = .silent
    case .senderMuted: self = .senderMuted
    case .snoozed: self = .snoozed
    case .dnd: self = .dnd
    case .muted, .notMentioned: self = .level
    case .active: self = .active
    case .noDevice: self = .devices
    case .optedOut: self = .gate
    case .throttled: self = .throttled
    }
  }

  public var name: String {
    switch self {
    case .silent: "silent"
    case .senderMuted: "sender_muted"
    case .snoozed: "snoozed"
    case .dnd: "dnd"
    case .level: "muted / not_mentioned"
    case .active: "active"
    case .devices: "no_device"
    case .gate: "opted_out"
    case .throttled: "throttled"
    }
  }
}

/// The gateway gate's verdict on one device, and why (section 3's gate).
public enum GateVerdict: UInt8, Sendable {
  /// The gateway is mandatory in the message's category.
  case mandatoryGateway
  /// The user restricted the gateway (and it is not mandatory here).
  case restricted
  /// No category, not restricted.
  case noCategory
  /// Opted in to the category: it is mandatory, by the user's row, or by
  /// the category's default.
  case optedInMandatory, optedInByUser, optedInByDefault
  /// Opted out of the category, by the user's row or the category's default.
  case optedOutByUser, optedOutByDefault
  /// Opted in to the category, but out of it on this gateway.
  case optedOutOnGateway

  @inline(__always)
  public var passes: Bool {
    switch self {
    case .mandatoryGateway, .noCategory, .optedInMandatory, .optedInByUser, .optedInByDefault:
      true
    case .restricted, .optedOutByUser, .optedOutByDefault, .optedOutOnGateway: false
    }
  }
}

/// The contract's rule chain, written once. `Evaluator` calls it for each
/// pair, and for each group of alike members of a channel share; `explain`
/// narrates what it decides (`Evaluator.inspect`).
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
    /// The chat level of a member who set none of their own
    /// (`Index.channelDefaultChat`).
    let defaultChat: Level

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
    guard verdict.reason == nil, presence.applies(to: terms.kind), isActive() else {
      return verdict
    }
    if presence.action == .suppress {
      return Verdict(reason: .active, trigger: .message, deliverAt: terms.ts)
    }
    verdict.deliverAt = max(
      verdict.deliverAt, terms.ts.addingSaturated(presence.delayMilliseconds))
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
    let settings = levelSettings(memberSettings, terms, pair)
    let mentioned =
      settings.mentionNotifications
      && (pair.named || (terms.mentionAll && settings.mentionAllNotifications))
    let (reason, trigger) = levelRule(settings, terms.kind, mentioned: mentioned)
    return Verdict(reason: reason, trigger: trigger, deliverAt: deliverAt)
  }

  /// The settings rule 4 reads: the chat level a thread's preference sets,
  /// else the member's, else the channel's default.
  @inline(__always)
  static func levelSettings(_ settings: MemberSettings, _ terms: Terms, _ pair: PairTerms)
    -> MemberSettings
  {
    if let level = pair.threadLevel { return settings.with(chatLevel: level) }
    return settings.resolvingChannelDefault(terms.defaultChat)
  }

  /// `presence_action` and `presence_delay_ms`, as the rules read them.
  struct PresencePolicy {
    let action: PresenceAction
    let delayMilliseconds: Int64

    init(_ settings: AppSettings) {
      action = settings.presenceAction ?? .ignore
      delayMilliseconds = settings.presenceDelay
    }

    /// Rule 5 applies to a user active at ts: presence is in force, for
    /// any kind but calls.
    @inline(__always)
    func applies(to kind: MessageKind) -> Bool { action != .ignore && kind != .call }
  }

  /// Rule 4: muted / not_mentioned by kind and level, or the trigger. A
  /// muted call or pinned message keeps its trigger (the pair has none, but
  /// `explain` says what it would have been).
  @inline(__always)
  static func levelRule(_ settings: MemberSettings, _ kind: MessageKind, mentioned: Bool)
    -> (reason: Reason?, trigger: Trigger)
  {
    switch kind {
    case .call:
      return settings.callsOn ? (nil, .call) : (.muted, .call)
    case .pinned where settings.pinnedNotifications:
      return settings.chatLevel == .none ? (.muted, .pinned) : (nil, .pinned)
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

  /// Rule 8's window: whether an earlier counted delivery at `earlier`
  /// counts against a pair at `ts` (ts − window < earlier ≤ ts).
  @inline(__always)
  public static func countsAgainst(_ earlier: Int64, at ts: Int64, window: Int64) -> Bool {
    guard earlier <= ts else { return false }
    let (age, overflow) = ts.subtractingReportingOverflow(earlier)
    return !overflow && age < window
  }

  /// Rule 8's limit: whether `counted` earlier deliveries in the window
  /// throttle a 'message' pair.
  @inline(__always)
  public static func reachesLimit(_ counted: Int64, _ throttle: AppSettings.Throttle) -> Bool {
    counted >= throttle.messages
  }

  /// The gateway gate (rules 6 and 7's test) for one device on gateway row
  /// `g` of user `u`, whose record is `state`, for category `cat` (or −1).
  @inline(__always)
  func gateVerdict(
    gateway g: Int, restricted: Bool, user u: Int, _ state: UserState, category cat: Int
  ) -> GateVerdict {
    let c = columns
    let gateways = index.gateways.count
    if cat >= 0 && c.categoryGatewayMandatory[cat &* gateways &+ g] { return .mandatoryGateway }
    if restricted { return .restricted }
    if cat < 0 { return .noCategory }
    var whole: Preference? = nil
    var onGateway: Preference? = nil
    let prefs =
      state.hasCategoryPrefs ? Int(c.userCategoryPrefs[u])..<Int(c.userCategoryPrefs[u + 1]) : 0..<0
    for r in prefs where c.categoryPrefCategory[r] == cat {
      let prefGateway = Int(c.categoryPrefGateway[r])
      if prefGateway < 0 {
        whole = c.categoryPref[r]
      } else if prefGateway == g {
        onGateway = c.categoryPref[r]
      }
    }
    if c.categoryMandatory[cat] {
      return onGateway == .optOut ? .optedOutOnGateway : .optedInMandatory
    }
    if (whole ?? c.categoryDefault[cat]) == .optOut {
      return whole != nil ? .optedOutByUser : .optedOutByDefault
    }
    if onGateway == .optOut { return .optedOutOnGateway }
    return whole != nil ? .optedInByUser : .optedInByDefault
  }

  /// Rule 1: ts lies in a window of the snooze group (a slot's windows at
  /// the user, scope and channel level), if any.
  @inline(__always)
  func isSnoozed(group: Int32, _ ts: Int64) -> Bool {
    let group = Int(group)
    if group < 0 { return false }
    for w in Int(columns.snoozeGroups[group])..<Int(columns.snoozeGroups[group + 1])
    where columns.snoozeBounds[2 * w] <= ts && ts < columns.snoozeBounds[2 * w + 1] {
      return true
    }
    return false
  }

  /// Rule 2: the local minute of the week lies in the user's DND pattern.
  @inline(__always)
  func isInDND(_ state: UserState, _ ts: Int64) -> Bool {
    isInDND(pattern: state.dnd, zone: state.zone, ts)
  }

  /// Rule 2 for DND pattern `pattern` (−1: none) in zone `zone`.
  @inline(__always)
  func isInDND(pattern: Int32, zone: UInt16, _ ts: Int64) -> Bool {
    pattern >= 0 && isInDND(pattern: pattern, minute: localMinute(zone: Int(zone), ts))
  }

  /// Rule 2 for DND pattern `pattern` (−1: none) at local minute of the
  /// week `minute`.
  @inline(__always)
  func isInDND(pattern: Int32, minute: Int) -> Bool {
    pattern >= 0
      && columns.dndWords[Int(pattern) &* DNDPattern.wordCount &+ minute &>> 6]
        & (1 &<< UInt64(minute & 63)) != 0
  }
}
