import FanoutIndex

/// Why a snapshot was refused: the table, the offending row's key and the
/// column, as far as they are known, and what is wrong.
public struct SnapshotError: Error, CustomStringConvertible, Equatable {
  public let table: String?
  public let key: String?
  public let column: String?
  public let reason: String

  public init(table: String? = nil, key: String? = nil, column: String? = nil, reason: String) {
    self.table = table
    self.key = key
    self.column = column
    self.reason = reason
  }

  public var description: String {
    var parts: [String] = []
    if let table { parts.append("table \(table)") }
    if let key { parts.append("row \(key)") }
    if let column { parts.append("column \(column)") }
    return "snapshot refused: " + (parts.isEmpty ? "" : parts.joined(separator: ", ") + ": ")
      + reason
  }
}

extension SnapshotError {
  /// Two rows for one (channel, user) pair; `key` packs `channel << 32 | user`.
  static func duplicatePair(in table: String, key: UInt64, channels: BytePool, users: StringTable)
    -> SnapshotError
  {
    let channel = channels.string(Int(key >> 32))
    let user = users[Int(UInt32(truncatingIfNeeded: key))]
    return SnapshotError(
      table: table, key: "channel_id='\(channel)', user_id='\(user)'", reason: "duplicate key")
  }
}
