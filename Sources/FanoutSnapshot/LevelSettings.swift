import FanoutModel

/// One level's own preference columns (a users, scope_prefs or channel_prefs
/// row), NULL ("inherit from the next level") as nil. `LevelRow` packs these
/// for the index; `fanout explain` and `fanout prefs` show them as they are.
public struct LevelSettings: Sendable, Equatable {
  public var chatLevel: Level?
  public var callLevel: Level?
  /// snooze_start; nil = from the beginning of time.
  public var snoozeStart: Int64?
  /// snooze_until; nil = no snooze at this level.
  public var snoozeUntil: Int64?
  public var mentionNotifications: Bool?
  public var pinnedNotifications: Bool?
  public var showPreview: Bool?
  /// Contract v2: whether an @all (mention_all) counts as a mention.
  public var mentionAllNotifications: Bool?

  public init(
    chatLevel: Level? = nil, callLevel: Level? = nil, snoozeStart: Int64? = nil,
    snoozeUntil: Int64? = nil, mentionNotifications: Bool? = nil,
    pinnedNotifications: Bool? = nil, showPreview: Bool? = nil,
    mentionAllNotifications: Bool? = nil
  ) {
    self.chatLevel = chatLevel
    self.callLevel = callLevel
    self.snoozeStart = snoozeStart
    self.snoozeUntil = snoozeUntil
    self.mentionNotifications = mentionNotifications
    self.pinnedNotifications = pinnedNotifications
    self.showPreview = showPreview
    self.mentionAllNotifications = mentionAllNotifications
  }

  /// True when every column is NULL: the row changes nothing.
  public var isEmpty: Bool { self == LevelSettings() }

  /// Whether `ts` lies in this level's own snooze window `[start, until)`.
  public func snoozes(at ts: Int64) -> Bool {
    guard let until = snoozeUntil else { return false }
    return (snoozeStart ?? .min) <= ts && ts < until
  }

  /// Reads `SnapshotSchema.levelColumns` from the row, starting at column
  /// `first`, and mention_all_notifications, the table's first optional
  /// column; channel_prefs also accepts chat_level 'default' (= NULL).
  package init(_ row: TableReader, first: Int32, acceptDefault: Bool = false) throws(SnapshotError)
  {
    let allowed = acceptDefault ? "all, mentions, none or default" : "all, mentions or none"
    if acceptDefault && row.isDefault(first) {
      chatLevel = nil
    } else {
      chatLevel = try row.enumerated(first, allowed, Level.init(chatLevel:))
    }
    callLevel = try row.enumerated(first + 1, "all or none", Level.init(callLevel:))
    snoozeStart = try row.optionalInt(first + 2)
    snoozeUntil = try row.optionalInt(first + 3)
    mentionNotifications = try row.optionalFlag(first + 4)
    pinnedNotifications = try row.optionalFlag(first + 5)
    showPreview = try row.optionalFlag(first + 6)
    mentionAllNotifications = try row.optionalFlag(Int32(row.table.columns.count))
  }
}
