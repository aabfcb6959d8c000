/// FanoutModel owns the contract's small vocabulary: chat and call levels,
/// channel scopes, message kinds, and the outcome of one (message, recipient)
/// pair. Everything here is a `UInt8` enum so that columns and counters stay
/// flat; the JSON spelling of each value lives next to it.

/// A notification level (`chat_level`, `call_level`).
public enum Level: UInt8, Sendable, CaseIterable, BitwiseCopyable {
  case all = 0
  case mentions = 1
  case none = 2

  /// The contract's lower-case spelling.
  public var name: String {
    switch self {
    case .all: "all"
    case .mentions: "mentions"
    case .none: "none"
    }
  }

  /// Parses a chat level (`all`, `mentions`, `none`).
  public init?(chatLevel name: String) {
    switch name {
    case "all": self = .all
    case "mentions": self = .mentions
    case "none": self = .none
    default: return nil
    }
  }

  /// Parses a call level: only `all` and `none` exist for calls.
  public init?(callLevel name: String) {
    switch name {
    case "all": self = .all
    case "none": self = .none
    default: return nil
    }
  }
}

/// The kind of a channel, which selects the user's scope preferences.
public enum Scope: UInt8, Sendable, CaseIterable, BitwiseCopyable {
  case direct = 0
  case group = 1
  case broadcast = 2

  public var name: String {
    switch self {
    case .direct: "direct"
    case .group: "group"
    case .broadcast: "broadcast"
    }
  }

  public init?(name: String) {
    switch name {
    case "direct": self = .direct
    case "group": self = .group
    case "broadcast": self = .broadcast
    default: return nil
    }
  }
}

/// The kind of a message in the traffic.
public enum MessageKind: UInt8, Sendable, CaseIterable {
  case message = 0
  case call = 1
  case pinned = 2

  public var name: String {
    switch self {
    case .message: "message"
    case .call: "call"
    case .pinned: "pinned"
    }
  }

  public init?(name: String) {
    switch name {
    case "message": self = .message
    case "call": self = .call
    case "pinned": self = .pinned
    default: return nil
    }
  }
}

/// Why a delivered pair was notified.
public enum Trigger: UInt8, Sendable, CaseIterable {
  case message = 0
  case mention = 1
  case call = 2
  case pinned = 3

  public var name: String {
    switch self {
    case .message: "message"
    case .mention: "mention"
    case .call: "call"
    case .pinned: "pinned"
    }
  }
}

/// Why a pair was not delivered, in rule order (contract v2, section 5.3).
public enum Reason: UInt8, Sendable, CaseIterable {
  case silent = 0
  case senderMuted = 1
  case snoozed = 2
  case dnd = 3
  case muted = 4
  case notMentioned = 5
  case active = 6
  case noDevice = 7
  case optedOut = 8
  case throttled = 9

  public var name: String {
    switch self {
    case .silent: "silent"
    case .senderMuted: "sender_muted"
    case .snoozed: "snoozed"
    case .dnd: "dnd"
    case .muted: "muted"
    case .notMentioned: "not_mentioned"
    case .active: "active"
    case .noDevice: "no_device"
    case .optedOut: "opted_out"
    case .throttled: "throttled"
    }
  }

  /// What the reason means, in one line, for reports read by people.
  public var definition: String {
    switch self {
    case .silent: "the message was sent silently"
    case .senderMuted: "the recipient muted the sender"
    case .snoozed:
      "the recipient snoozed notifications (everywhere, this kind of channel, or this channel)"
    case .dnd: "inside the recipient's do-not-disturb hours"
    case .muted: "the recipient's level for this channel is none (or calls are off)"
    case .notMentioned:
      "the recipient asked for mentions only, and the message does not mention them"
    case .active: "the recipient was active in the app, so no push"
    case .noDevice: "the recipient has no device"
    case .optedOut:
      "every device of the recipient is blocked by their category or gateway preferences"
    case .throttled: "over the per-channel push limit for the time window"
    }
  }
}

/// This program and the contract it implements (`fanout --version`, and the
/// reports' footers).
public let fanoutVersion = "fanout 1.4.0 (contract v3)"

/// What presence does to a pair whose user is active (`presence_action`).
public enum PresenceAction: String, Sendable, CaseIterable {
  case ignore, suppress, delay

  public var name: String { rawValue }
}

/// What snooze and DND do to a user's pairs (`quiet_action`).
public enum QuietAction: String, Sendable, CaseIterable {
  case drop
  case `defer`

  public var name: String { rawValue }
}

/// A category preference (`opt_in` / `opt_out`).
public enum Preference: UInt8, Sendable, BitwiseCopyable {
  case optIn = 0
  case optOut = 1

  public init?(name: String) {
    switch name {
    case "opt_in": self = .optIn
    case "opt_out": self = .optOut
    default: return nil
    }
  }
}

/// The decision for one pair as one byte: delivered with a trigger, or
/// suppressed with a reason. `notMember` stands for a pair that one of two
/// compared snapshots does not have (the user is not a member there).
public struct Outcome: RawRepresentable, Hashable, Sendable {
  public let rawValue: UInt8

  public init(rawValue: UInt8) { self.rawValue = rawValue }

  @inlinable public static func delivered(_ trigger: Trigger) -> Outcome {
    Outcome(rawValue: trigger.rawValue)
  }

  @inlinable public static func suppressed(_ reason: Reason) -> Outcome {
    Outcome(rawValue: triggers &+ reason.rawValue)
  }

  public static let notMember = Outcome(
    rawValue: UInt8(Trigger.allCases.count + Reason.allCases.count))

  /// Every outcome, triggers first, then reasons in rule order, then `notMember`.
  public static let allCases: [Outcome] = (0...notMember.rawValue).map(Outcome.init(rawValue:))

  /// (Inlinable: the what-if tallies ask it of every pair.)
  @inlinable public var isDelivered: Bool { rawValue < Outcome.triggers }

  /// Outcomes below this are deliveries, one per trigger
  /// (`Trigger.allCases.count`, as a test checks): a constant, where a
  /// stored static took a lazy-initialization check on every pair the
  /// what-if walks read it for.
  @usableFromInline static var triggers: UInt8 { 4 }

  /// The reason of a suppressed pair (nil: delivered, or `notMember`).
  @inlinable public var reason: Reason? {
    isDelivered ? nil : Reason(rawValue: rawValue &- Outcome.triggers)
  }

  public var name: String {
    if let trigger = Trigger(rawValue: rawValue) { return trigger.name }
    if let reason = Reason(rawValue: rawValue - UInt8(Trigger.allCases.count)) {
      return reason.name
    }
    return "not_member"
  }
}
