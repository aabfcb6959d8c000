import FanoutModel
import FanoutSnapshot

/// The decision for one (message, recipient) pair with every step that led
/// to it. Each check is filled in even when an earlier rule decided, so that
/// a reader sees what would have happened next; `decidedBy` says which rule won.
public struct Explanation: Sendable {
  public enum Pair: Sendable, Equatable {
    case evaluated
    /// The user is not a member of the channel: no pair, nothing is sent.
    case notMember
    /// The user sent the message: senders are never notified.
    case sender
  }

  /// The contract's rules, numbered as in its section 5.3. (Rule 8,
  /// throttling, is not built yet.)
  public enum Rule: Int, Sendable {
    case silent = 0
    case senderMuted = 1
    case snoozed = 2
    case dnd = 3
    case level = 4
    case active = 5
    case devices = 6
    case gate = 7
    case throttled = 8

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

  public struct Message: Sendable {
    public var id: String
    public var line: Int
    public var channel: String
    public var scope: Scope
    public var kind: MessageKind
    public var ts: Int64
    public var force: Bool
    public var silent: Bool
    public var sender: String?
    public var category: String?
    /// The message's thread id, if it has one.
    public var thread: String?
  }

  /// One level's snooze window and whether it holds ts.
  public struct SnoozeWindow: Sendable {
    public var source: SettingSource
    /// nil = from the beginning of time.
    public var start: Int64?
    public var until: Int64
    public var containsTS: Bool
  }

  public struct LocalClock: Sendable {
    public var timeZone: String
    public var offsetSeconds: Int32
    public var year: Int64, month: Int64, day: Int64
    /// ISO 1 = Monday .. 7 = Sunday.
    public var weekday: Int
    /// hour × 60 + minute of the wall clock.
    public var minute: Int
  }

  public enum Schedule: Sendable {
    case none
    case daily(DailyWindow)
    /// The user's weekly windows; they replace any daily window.
    case weekly([WeeklyWindow], replacedDaily: DailyWindow?)
  }

  public struct DND: Sendable {
    public var clock: LocalClock
    public var schedule: Schedule
    /// The window holding the local time: weekly `(weekday, start, end)` or daily (weekday nil).
    public var matched: (weekday: Int?, start: Int, end: Int)?
  }

  public struct Mention: Sendable {
    public var listed: Bool
    public var mentionAll: Bool
    public var repliedTo: Bool
    /// The user's resolved mention_notifications.
    public var notificationsOn: Bool
    /// The channel's size and the settings' limit for mention_all.
    public var channelMembers: Int64
    public var mentionAllMaxMembers: Int64?
    /// The user's resolved mention_all_notifications.
    public var mentionAllNotificationsOn: Bool

    /// Whether mention_all applies in this channel (its size is within the limit).
    public var mentionAllApplies: Bool { mentionAllMaxMembers.map { channelMembers <= $0 } ?? true }
    /// Whether the message's mention_all counts as a mention for this user.
    public var mentionAllCounts: Bool {
      mentionAll && mentionAllApplies && mentionAllNotificationsOn
    }
    /// Listed, replied to, or an @all that counts; and notifications on.
    public var mentioned: Bool { notificationsOn && (listed || repliedTo || mentionAllCounts) }
  }

  /// What snooze and DND do for this user, and where they would deliver.
  public struct Deferral: Sendable {
    /// 'drop' or 'defer', and the level it came from (users, settings, default).
    public var quietAction: QuietAction
    public var source: SettingSource
    /// The first free instant within 7 days, when the quiet action is
    /// 'defer' and the message is neither a call nor forced.
    public var instant: Int64?
    /// The user's wall clock at `instant`.
    public var localClock: LocalClock?
    /// Why each step moved later: the windows that held the candidate.
    public var steps: [String]
  }

  /// Rule 5: the presence policy and the user's windows.
  public struct Presence: Sendable {
    /// 'ignore', 'suppress' or 'delay'.
    public var action: PresenceAction
    public var delayMilliseconds: Int64
    public var windows: [(from: Int64, until: Int64)]
    /// The window holding ts, if any.
    public var matched: (from: Int64, until: Int64)?
  }

  /// Rule 8: the throttle, and the earlier lines that count against it.
  public struct Throttle: Sendable {
    public var messages: Int64
    public var windowMilliseconds: Int64
    /// Whether earlier lines were given (`--messages FILE --id M`); with
    /// `--message JSON` there are none.
    public var replayed: Bool
    /// The earlier lines delivered to the user in this channel with
    /// trigger 'message' (and not throttled) whose ts lies in
    /// (ts − window, ts].
    public var counted: [ThrottleHistory.Delivery]

    /// Whether the throttle holds back a pair delivered with `trigger`.
    public func holds(_ trigger: Trigger) -> Bool {
      trigger == .message && Int64(counted.count) >= messages
    }
  }

  public struct Device: Sendable {
    public var record: DeviceRecord
    public var passes: Bool
    /// The gate's reason, in words.
    public var why: String
  }

  public var message: Message
  public var user: String
  public var pair: Pair
  public var settings: EffectiveSettings
  /// The user has a user_mutes row for the message's sender.
  public var mutedSender: Bool
  public var snoozeWindows: [SnoozeWindow]
  public var dnd: DND
  public var mention: Mention
  /// What the level rule does, in words, and its verdict (nil: passes with `trigger`).
  public var levelRule: String
  public var levelReason: Reason?
  public var trigger: Trigger
  public var devices: [Device]
  public var deferral: Deferral
  public var presence: Presence
  /// Nil when the snapshot sets no throttle.
  public var throttle: Throttle? = nil
  /// When a delivered pair is delivered: ts unless deferral or presence
  /// set a later instant.
  public var deliverAt: Int64 = 0
  /// Nil for no pair (not a member, or the sender).
  public var outcome: Outcome?
  public var decidedBy: Rule?

  public var snoozed: Bool { snoozeWindows.contains { $0.containsTS } }
  public var inDND: Bool { dnd.matched != nil }
  public var passingDevices: [DeviceRecord] { devices.filter(\.passes).map(\.record) }
  /// Snooze or DND would suppress the pair (force aside).
  public var quiet: Bool { !message.force && (snoozed || inDND) }
  /// The pair goes on past rules 2 and 3 to a later delivery time.
  public var deferred: Bool { quiet && message.kind != .call && deferral.instant != nil }
}

/// Rule 8's memory for one (user, channel), built by explaining the earlier
/// lines in input order: each pair delivered with trigger 'message' and not
/// throttled is counted.
public struct ThrottleHistory: Sendable {
  public struct Delivery: Sendable {
    public var line: Int
    public var message: String
    public var ts: Int64
  }

  public private(set) var deliveries: [Delivery] = []
  /// False for a lone message (`--message JSON`): no earlier lines.
  public var replayed: Bool

  public init(replayed: Bool = true) { self.replayed = replayed }

  /// Counts `e` if rule 8 counts it: delivered with trigger 'message'.
  public mutating func record(_ e: Explanation) {
    guard e.outcome == .delivered(.message) else { return }
    deliveries.append(.init(line: e.message.line, message: e.message.id, ts: e.message.ts))
  }

  /// The counted deliveries whose ts' lies in (ts − window, ts].
  func counted(at ts: Int64, window: Int64) -> [Delivery] {
    deliveries.filter {
      let (age, overflow) = ts.subtractingReportingOverflow($0.ts)
      return $0.ts <= ts && !overflow && age < window
    }
  }
}
