import FanoutKernel
import FanoutModel
import FanoutSnapshot

/// The decision for one (message, recipient) pair with every step that led
/// to it, in words: the kernel's inspection of the pair (`PairInspection`:
/// each check made even when an earlier rule decided, so that a reader sees
/// what would have happened next, and the chain's verdict) beside the
/// snapshot's rows it came from. `decidedBy` says which rule won.
public struct Explanation: Sendable {
  public enum Pair: Sendable, Equatable {
    case evaluated
    /// The user is not a member of the channel: no pair, nothing is sent.
    case notMember
    /// The user sent the message: senders are never notified.
    case sender
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
    /// The kernel's rule 4: whether mention_all applies in this channel
    /// (its size is within the limit), counts as a mention for this user,
    /// and whether the user is mentioned at all.
    public var mentionAllApplies: Bool
    public var mentionAllCounts: Bool
    public var mentioned: Bool
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
    /// The kernel's rule 8 for this pair's trigger.
    public var holds: Bool
  }

  public struct Device: Sendable {
    public var record: DeviceRecord
    /// The kernel's gate verdict.
    public var passes: Bool
    /// The gate's reason, in words.
    public var why: String
  }

  /// Contract v3: the pair's notification, and what later read lines did
  /// to it (`explain --messages FILE --id M` with notification groups on).
  public struct Notification: Sendable {
    public var group: Int64
    public var id: Int64
    public var badge: Int64
    /// The notifications it hid.
    public var hid: [Int64]
    /// The read line that removed it, if any: its line number, id and ts,
    /// and whether it cancelled the push (read before it was due).
    public var removedBy: (line: Int, id: String, ts: Int64, cancelled: Bool)?
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
  /// The kernel's rules 2 and 3 at ts (force aside).
  public var snoozed = false
  public var inDND = false
  /// Snooze or DND would suppress the pair (force aside).
  public var quiet = false
  /// The kernel's rule 5: ts lies in a presence window.
  public var active = false
  /// Contract v3, when notification groups are on and the pair is delivered.
  public var notification: Notification? = nil

  public var passingDevices: [DeviceRecord] { devices.filter(\.passes).map(\.record) }
  /// The pair goes on past rules 2 and 3 to a later delivery time.
  public var deferred: Bool { quiet && deferral.instant != nil }
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

  /// The counted deliveries that count against a pair at `ts` (rule 8's window).
  func counted(at ts: Int64, window: Int64) -> [Delivery] {
    deliveries.filter { Evaluator.countsAgainst($0.ts, at: ts, window: window) }
  }
}
