import FanoutModel

/// One level's preference columns (users, scope_prefs or channel_prefs), one
/// entry per row; `unset` marks NULL ("inherit from the next level").
struct LevelPrefs {
  static let unset: UInt8 = 0xFF

  var chat: [UInt8] = []
  var call: [UInt8] = []
  /// The snooze window `[start, until)`; a NULL start is `Int64.min`, a NULL
  /// until (no snooze) is also `Int64.min`, which makes the window empty.
  var snoozeStart: [Int64] = []
  var snoozeUntil: [Int64] = []
  var mention: [UInt8] = []
  var pinned: [UInt8] = []
  var preview: [UInt8] = []

  var count: Int { chat.count }

  /// Reads `SnapshotSchema.levelColumns` from the row, starting at column `first`.
  mutating func append(_ row: TableReader, first: Int32, acceptDefault: Bool = false) throws(SnapshotError) {
    let allowed = acceptDefault ? "all, mentions, none or default" : "all, mentions or none"
    let chatLevel = try row.enumerated(first, allowed) { s -> UInt8? in
      if acceptDefault && s == "default" { return Self.unset }
      return Level(chatLevel: s)?.rawValue
    }
    chat.append(chatLevel ?? Self.unset)
    call.append(try row.enumerated(first + 1, "all or none", Level.init(callLevel:))?.rawValue ?? Self.unset)
    snoozeStart.append(try row.optionalInt(first + 2) ?? .min)
    snoozeUntil.append(try row.optionalInt(first + 3) ?? .min)
    mention.append(Self.flag(try row.optionalFlag(first + 4)))
    pinned.append(Self.flag(try row.optionalFlag(first + 5)))
    preview.append(Self.flag(try row.optionalFlag(first + 6)))
  }

  private static func flag(_ b: Bool?) -> UInt8 { b.map { $0 ? 1 : 0 } ?? unset }

  /// Whether row `i` has a non-empty snooze window.
  func hasSnooze(_ i: Int) -> Bool { snoozeStart[i] < snoozeUntil[i] }
}
