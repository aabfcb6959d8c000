/// FanoutExplain answers "why": the effective settings of one user with the
/// level each came from (`fanout prefs get`), and the whole decision path of
/// one (message, recipient) pair (`fanout explain`). It reads the user's rows
/// as stored (`SnapshotRecords`) and follows the contract's rules step by
/// step, narrating each one; the kernel evaluates the same rules from the
/// packed index, and tests hold the two to the same answer on every pair.
import FanoutModel
import FanoutSnapshot

/// Where a setting's value came from, most specific first.
public enum SettingSource: Int, Sendable, Comparable {
  case thread, channel, scope, user, largeChannel, kind, settings, builtIn

  /// The table the value was read from (`default` for the built-in value).
  public var name: String {
    switch self {
    case .thread: "thread_prefs"
    case .channel: "channel_prefs"
    case .scope: "scope_prefs"
    case .user: "users"
    case .largeChannel: "large_channel"
    case .kind: "kind_default"
    case .settings: "settings"
    case .builtIn: "default"
    }
  }

  public static func < (a: Self, b: Self) -> Bool { a.rawValue < b.rawValue }
}

/// A resolved setting: the first level that sets it wins.
public struct Resolution<Value: Sendable & Equatable>: Sendable {
  public let value: Value
  public let source: SettingSource
  /// The levels consulted in order, each with its own value (nil = NULL),
  /// up to and including `source`.
  public let chain: [(source: SettingSource, value: Value?)]

  init(_ levels: [(SettingSource, Value?)], builtIn: Value) {
    var chain: [(source: SettingSource, value: Value?)] = []
    for (source, value) in levels {
      chain.append((source, value))
      if let value {
        self.value = value
        self.source = source
        self.chain = chain
        return
      }
    }
    chain.append((.builtIn, builtIn))
    self.value = builtIn
    self.source = .builtIn
    self.chain = chain
  }
}

/// What the chat level's defaults depend on: the channel's kind and size.
public struct ChannelTraits: Sendable {
  public var scope: Scope
  /// The channel's size for the size rules; nil when no channel is meant
  /// (a user's defaults for a kind of channel).
  public var members: Int64?

  public init(scope: Scope, members: Int64?) {
    self.scope = scope
    self.members = members
  }
}

/// The per-pair settings, resolved thread → channel → scope → user → the
/// channel's defaults (size, kind) → settings → default.
public struct EffectiveSettings: Sendable {
  public let chatLevel: Resolution<Level>
  public let callLevel: Resolution<Level>
  public let mentionNotifications: Resolution<Bool>
  public let pinnedNotifications: Resolution<Bool>
  public let showPreview: Resolution<Bool>
  public let mentionAllNotifications: Resolution<Bool>

  /// Resolves with the levels given: pass nil `channel` / `scope` rows for
  /// levels that have no row, and leave levels out of `levels` to leave
  /// them out of the chain altogether (a user's defaults for a scope).
  /// `thread` is the thread_prefs level, when the message has a thread;
  /// `traits` the channel's kind and size, for the chat level's defaults.
  public init(
    thread: Level?? = nil, channel: LevelSettings?, scope: LevelSettings?, user: LevelSettings,
    app: AppSettings, traits: ChannelTraits?, levels: [SettingSource]
  ) {
    func rows(_ source: SettingSource) -> LevelSettings? {
      switch source {
      case .channel: channel
      case .scope: scope
      default: user
      }
    }
    func chain<V>(_ key: KeyPath<LevelSettings, V?>) -> [(SettingSource, V?)] {
      levels.map { ($0, rows($0)?[keyPath: key]) }
    }
    // A chosen level wins; the large-channel and kind defaults apply only
    // where the user chose none.
    var chat: [(SettingSource, Level?)] = []
    if let thread { chat.append((.thread, thread)) }
    chat += chain(\.chatLevel)
    if let traits {
      // The defaults as the index resolves them, each shown.
      app.forEachDefaultChatLevel(scope: traits.scope, members: traits.members) { source, level in
        switch source {
        case .largeChannel: chat.append((.largeChannel, level))
        case .kind: chat.append((.kind, level))
        case .settings: chat.append((.settings, level))
        }
        return true
      }
    } else {
      chat.append((.settings, app.defaultChatLevel))
    }
    chatLevel = Resolution(chat, builtIn: .all)
    callLevel = Resolution(chain(\.callLevel) + [(.settings, app.defaultCallLevel)], builtIn: .all)
    mentionNotifications = Resolution(chain(\.mentionNotifications), builtIn: true)
    pinnedNotifications = Resolution(chain(\.pinnedNotifications), builtIn: true)
    showPreview = Resolution(chain(\.showPreview), builtIn: true)
    mentionAllNotifications = Resolution(chain(\.mentionAllNotifications), builtIn: true)
  }

  /// Each setting as (column name, value, source), in the contract's order.
  public var rows: [(name: String, value: String, source: SettingSource)] {
    [
      ("chat_level", chatLevel.value.name, chatLevel.source),
      ("call_level", callLevel.value.name, callLevel.source),
      ("mention_notifications", flag(mentionNotifications.value), mentionNotifications.source),
      ("pinned_notifications", flag(pinnedNotifications.value), pinnedNotifications.source),
      ("show_preview", flag(showPreview.value), showPreview.source),
      (
        "mention_all_notifications", flag(mentionAllNotifications.value),
        mentionAllNotifications.source
      ),
    ]
  }
}

func flag(_ b: Bool) -> String { b ? "1" : "0" }
