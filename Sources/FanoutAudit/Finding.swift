import FanoutModel

/// What an audit finds wrong with one push, or with one push not sent.
public enum FindingKind: Int, CaseIterable, Sendable {
  /// The rules deliver to this device; nothing was sent to it.
  case missed
  /// Sent, but the rules suppress the pair (with the reason).
  case spurious
  /// Sent to a device the user does not have, or that the gateway gate blocks.
  case wrongDevice
  /// Sent to this device again.
  case duplicate
  /// Sent more than the tolerance before the pair's delivery time.
  case early
  /// Sent more than the tolerance after the pair's delivery time.
  case late
  /// Sent for a message id that no line of the traffic has.
  case unknownMessage

  public var name: String {
    switch self {
    case .missed: "missed"
    case .spurious: "spurious"
    case .wrongDevice: "wrong_device"
    case .duplicate: "duplicate"
    case .early: "early"
    case .late: "late"
    case .unknownMessage: "unknown_message"
    }
  }

  public init?(name: String) {
    guard let kind = Self.allCases.first(where: { $0.name == name }) else { return nil }
    self = kind
  }
}

/// Why a push was spurious: the rule that suppresses its pair (the words
/// `eval` uses), or that there is no such pair.
enum SpuriousReason: Equatable {
  case rule(Reason)
  /// The user is the message's sender.
  case sender
  /// The user is not a member of the message's channel.
  case notMember
  /// The snapshot has no such user.
  case unknownUser

  static let all: [SpuriousReason] =
    Reason.allCases.map(SpuriousReason.rule) + [.sender, .notMember, .unknownUser]

  var slot: Int {
    switch self {
    case .rule(let r): Int(r.rawValue)
    case .sender: Reason.allCases.count
    case .notMember: Reason.allCases.count + 1
    case .unknownUser: Reason.allCases.count + 2
    }
  }

  var name: String {
    switch self {
    case .rule(let r): r.name
    case .sender: "sender"
    case .notMember: "not_member"
    case .unknownUser: "unknown_user"
    }
  }
}

/// Why a device was the wrong one.
enum WrongDeviceReason: Int, CaseIterable {
  /// The user has no device with this token (or id) on this gateway.
  case notUsersDevice
  /// The user's device, but the gateway gate blocks it for this message.
  case gateBlocks

  var name: String {
    switch self {
    case .notUsersDevice: "not_users_device"
    case .gateBlocks: "gate_blocks"
    }
  }
}
