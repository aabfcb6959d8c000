import FanoutModel

/// One row of a level's preference columns (users, scope_prefs or
/// channel_prefs); `LevelRow.unset` marks NULL ("inherit from the next level").
struct LevelRow: Equatable {
  static let unset: UInt8 = 0xFF
  static let none = LevelRow(
    chat: unset, call: unset, snoozeStart: .min, snoozeUntil: .min, mention: unset, pinned: unset,
    preview: unset, mentionAll: unset)

  var chat: UInt8
  var call: UInt8
  /// The snooze window `[start, until)`; a NULL start is `Int64.min`, a NULL
  /// until (no snooze) is also `Int64.min`, which makes the window empty.
  var snoozeStart: Int64
  var snoozeUntil: Int64
  var mention: UInt8
  var pinned: UInt8
  var preview: UInt8
  var mentionAll: UInt8

  var hasSnooze: Bool { snoozeStart < snoozeUntil }

  /// Reads `SnapshotSchema.levelColumns` from the row, starting at column `first`.
  init(_ row: TableReader, first: Int32, acceptDefault: Bool = false) throws(SnapshotError) {
    let s = try LevelSettings(row, first: first, acceptDefault: acceptDefault)
    chat = s.chatLevel?.rawValue ?? Self.unset
    call = s.callLevel?.rawValue ?? Self.unset
    snoozeStart = s.snoozeStart ?? .min
    snoozeUntil = s.snoozeUntil ?? .min
    mention = Self.flag(s.mentionNotifications)
    pinned = Self.flag(s.pinnedNotifications)
    preview = Self.flag(s.showPreview)
    mentionAll = Self.flag(s.mentionAllNotifications)
  }

  private init(
    chat: UInt8, call: UInt8, snoozeStart: Int64, snoozeUntil: Int64, mention: UInt8, pinned: UInt8,
    preview: UInt8, mentionAll: UInt8
  ) {
    self.chat = chat
    self.call = call
    self.snoozeStart = snoozeStart
    self.snoozeUntil = snoozeUntil
    self.mention = mention
    self.pinned = pinned
    self.preview = preview
    self.mentionAll = mentionAll
  }

  private static func flag(_ b: Bool?) -> UInt8 { b.map { $0 ? 1 : 0 } ?? unset }

  /// The first set value of channel → scope → user, else `fallback`.
  @inline(__always)
  static func resolve(_ channel: UInt8, _ scope: UInt8, _ user: UInt8, _ fallback: UInt8) -> UInt8 {
    channel != unset ? channel : scope != unset ? scope : user != unset ? user : fallback
  }
}
