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
  case channel, scope, user, settings, builtIn

  /// The table the value was read from (`default` for the built-in value).
  public var name: String {
    switch self {
    case .channel: "channel_prefs"
    case .scope: "scope_prefs"
    case .user: "users"
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

/// The five per-pair settings, resolved channel → scope → user (→ settings) → default.
public struct EffectiveSettings: Sendable {
  public let chatLevel: Resolution<Level>
  public let callLevel: Resolution<Level>
  public let mentionNotifications: Resolution<Bool>
  public let pinnedNotifications: Resolution<Bool>
  public let showPreview: Resolution<Bool>

  /// Resolves with the levels given: pass nil `channel` / `scope` rows for
  /// levels that have no row, and `inChannel: false` to leave the channel
  /// level out of the chain altogether (a user's defaults for a scope).
  public init(
    channel: LevelSettings?, scope: LevelSettings?, user: LevelSettings,
    defaults: (chatLevel: Level?, callLevel: Level?), levels: [SettingSource]
  ) {
    func rows(_ source: SettingSource) -> LevelSettings? {
      switch source {
      case .channel: channel
      case .scope: scope
      default: user
      }
    }
    func chain<V>(_ key: KeyPath<LevelSettings, V?>, settings: V?) -> [(SettingSource, V?)] {
      var result = levels.map { ($0, rows($0)?[keyPath: key]) }
      if let settings { result.append((.settings, settings)) }
      return result
    }
    chatLevel = Resolution(chain(\.chatLevel, settings: defaults.chatLevel), builtIn: .all)
    callLevel = Resolution(chain(\.callLevel, settings: defaults.callLevel), builtIn: .all)
    mentionNotifications = Resolution(
      chain(\.mentionNotifications, settings: nil), builtIn: true)
    pinnedNotifications = Resolution(chain(\.pinnedNotifications, settings: nil), builtIn: true)
    showPreview = Resolution(chain(\.showPreview, settings: nil), builtIn: true)
  }

  /// Each setting as (column name, value, source), in the contract's order.
  public var rows: [(name: String, value: String, source: SettingSource)] {
    [
      ("chat_level", chatLevel.value.name, chatLevel.source),
      ("call_level", callLevel.value.name, callLevel.source),
      ("mention_notifications", flag(mentionNotifications.value), mentionNotifications.source),
      ("pinned_notifications", flag(pinnedNotifications.value), pinnedNotifications.source),
      ("show_preview", flag(showPreview.value), showPreview.source),
    ]
  }
}

func flag(_ b: Bool) -> String { b ? "1" : "0" }
