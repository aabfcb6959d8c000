/// The app-wide settings of a snapshot (its `settings` table), validated.
/// Every value is optional: nil where the key is absent.
public struct AppSettings: Sendable, Equatable {
  /// `default_chat_level`, `default_call_level`.
  public var defaultChatLevel: Level?
  public var defaultCallLevel: Level?
  /// `default_chat_level.direct`, `.group`, `.broadcast`, by `Scope.rawValue`.
  public var kindChatLevel: [Level?] = [nil, nil, nil]
  /// `large_channel_members` and `large_channel_level`, which come together.
  public var largeChannel: LargeChannel?
  /// `mention_all_max_members`.
  public var mentionAllMaxMembers: Int64?
  /// `presence_action`, `presence_delay_ms`, `default_quiet_action`.
  public var presenceAction: PresenceAction?
  public var presenceDelayMilliseconds: Int64?
  public var defaultQuietAction: QuietAction?
  /// `throttle_messages` with `throttle_window_ms`: rule 8.
  public var throttle: Throttle?
  /// `notification_groups` = 'on' with its caps: contract v3's
  /// notification state (nil: off).
  public var notificationGroups: NotificationGroups?
  /// `fanout_shard`, Fanout's own key (not the contract's): the raw "K/N"
  /// of a shard snapshot, read by `eval --mergeable` (see `ShardLabel`).
  public var shardLabel: String?

  /// The presence delay in force: `presence_delay_ms`, else 120 s.
  public var presenceDelay: Int64 { presenceDelayMilliseconds ?? 120_000 }

  public struct Throttle: Sendable, Equatable {
    public var messages: Int64
    public var windowMilliseconds: Int64

    public init(messages: Int64, windowMilliseconds: Int64) {
      self.messages = messages
      self.windowMilliseconds = windowMilliseconds
    }
  }

  /// `notification_group_size_max` and `notification_group_count_max`
  /// (nil: no limit), which need `notification_groups` = 'on'.
  public struct NotificationGroups: Sendable, Equatable {
    public var sizeMax: Int64?
    public var countMax: Int64?

    public init(sizeMax: Int64? = nil, countMax: Int64? = nil) {
      self.sizeMax = sizeMax
      self.countMax = countMax
    }
  }

  public struct LargeChannel: Sendable, Equatable {
    /// A channel with more members than this is large.
    public var members: Int64
    /// `mentions` or `none`.
    public var level: Level

    public init(members: Int64, level: Level) {
      self.members = members
      self.level = level
    }
  }

  public init() {}

  /// Whether `mention_all` counts in a channel of `members` members.
  @inlinable
  public func mentionAllApplies(members: Int64) -> Bool {
    guard let limit = mentionAllMaxMembers else { return true }
    return members <= limit
  }

  /// Where a default chat level comes from, in the order they are tried.
  public enum DefaultLevelSource: Sendable {
    case largeChannel, kind, settings
  }

  /// The defaults tried for a user who set no chat level at any of their
  /// own levels, in a channel of kind `scope` with `members` members (nil:
  /// no channel is meant, the size rule is left out): large channel → kind
  /// default → app default; `body` is told each (its level, or nil where it
  /// does not apply or is not set) until it returns false. The index
  /// (`defaultChatLevel`) and `explain`/`prefs get` both read them here.
  @inlinable
  public func forEachDefaultChatLevel(
    scope: Scope, members: Int64?, _ body: (DefaultLevelSource, Level?) -> Bool
  ) {
    if let largeChannel, let members {
      guard body(.largeChannel, isLarge(members: members) ? largeChannel.level : nil) else {
        return
      }
    }
    guard body(.kind, kindChatLevel[Int(scope.rawValue)]) else { return }
    _ = body(.settings, defaultChatLevel)
  }

  /// Whether a channel of `members` members is large (`large_channel_members`).
  @inlinable
  public func isLarge(members: Int64) -> Bool {
    guard let largeChannel else { return false }
    return members > largeChannel.members
  }

  /// The chat level of a user who set none at any of their own levels: the
  /// first default that applies, else 'all'.
  public func defaultChatLevel(scope: Scope, members: Int64) -> Level {
    var level = Level.all
    forEachDefaultChatLevel(scope: scope, members: members) { _, found in
      guard let found else { return true }
      level = found
      return false
    }
    return level
  }

  /// Whether every channel's default chat level (`Index.channelDefaultChat`)
  /// is the same under `other`.
  public func sameChannelDefaults(as other: AppSettings) -> Bool {
    largeChannel == other.largeChannel && kindChatLevel == other.kindChatLevel
      && defaultChatLevel == other.defaultChatLevel
  }

  /// Whether an index's membership slots are the same under `other`: the
  /// call default is resolved into them (a chat level left to the defaults
  /// is the channel's, resolved per message: `Index.channelDefaultChat`).
  public func sameSlotDefaults(as other: AppSettings) -> Bool {
    defaultCallLevel == other.defaultCallLevel
  }

  /// A settings value that must be a decimal integer: ASCII digits, no
  /// sign, spaces or leading zeros, at most `Int64.max`.
  public static func decimalInteger(_ text: String) -> Int64? {
    let bytes = Array(text.utf8)
    guard !bytes.isEmpty, bytes.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
    guard bytes.count == 1 || bytes[0] != 0x30 else { return nil }
    return Int64(text)
  }
}
