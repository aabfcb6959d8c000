/// FanoutSnapshot owns reading a preferences snapshot (a SQLite file) into an
/// `Index`: the schema check, the validation of every row, and the build of
/// the columnar index. It is all or nothing: the first violation refuses the
/// whole snapshot with a `SnapshotError` naming table, row key and column.

/// The tables and columns the contract requires.
enum SnapshotSchema {
  struct Table {
    let name: String
    let required: Bool
    let columns: [String]
  }

  /// The per-level preference columns shared by users, scope_prefs and channel_prefs,
  /// in the order `LevelPrefs.append` reads them.
  static let levelColumns = [
    "chat_level", "call_level", "snooze_start", "snooze_until", "mention_notifications",
    "pinned_notifications", "show_preview",
  ]

  static let tables: [Table] = [
    Table(name: "settings", required: false, columns: ["key", "value"]),
    Table(name: "users", required: true, columns: ["user_id"] + levelColumns + ["timezone", "dnd_start", "dnd_end"]),
    Table(name: "dnd_weekly", required: false, columns: ["user_id", "weekday", "start_min", "end_min"]),
    Table(name: "channels", required: true, columns: ["channel_id", "kind"]),
    Table(name: "members", required: true, columns: ["channel_id", "user_id"]),
    Table(name: "scope_prefs", required: false, columns: ["user_id", "scope"] + levelColumns),
    Table(name: "channel_prefs", required: true, columns: ["user_id", "channel_id"] + levelColumns),
    Table(name: "devices", required: true, columns: ["device_id", "user_id", "gateway", "token"]),
    Table(name: "categories", required: false, columns: ["category", "default_preference", "mandatory"]),
    Table(name: "category_gateways", required: false, columns: ["category", "gateway", "mandatory"]),
    Table(name: "category_prefs", required: false, columns: ["user_id", "category", "gateway", "preference"]),
    Table(name: "gateway_prefs", required: false, columns: ["user_id", "gateway", "restricted"]),
  ]

  static func table(_ name: String) -> Table { tables.first { $0.name == name }! }

  /// Gateway names become file names: `[a-z0-9][a-z0-9._-]*`, minus the
  /// names of the other output files.
  static func isValidGatewayName(_ bytes: UnsafeRawBufferPointer) -> Bool {
    guard let first = bytes.first, isLowerAlnum(first) else { return false }
    for c in bytes.dropFirst()
    where !(isLowerAlnum(c) || c == UInt8(ascii: ".") || c == UInt8(ascii: "_") || c == UInt8(ascii: "-")) {
      return false
    }
    let reserved = ["decisions", "summary", "rejected"]
    return !reserved.contains { $0.utf8.elementsEqual(bytes) }
  }

  private static func isLowerAlnum(_ c: UInt8) -> Bool {
    (c >= UInt8(ascii: "a") && c <= UInt8(ascii: "z")) || (c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9"))
  }
}
