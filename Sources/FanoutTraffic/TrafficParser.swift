import FanoutIndex
import FanoutModel

/// Turns traffic lines into a `MessageBatch`, rejecting what the contract rejects.
public struct TrafficParser {
  let index: Index

  public init(index: Index) { self.index = index }

  private enum Field: Int, CaseIterable {
    case id, channel, sender, ts, kind, mentions, mentionAll, replyTo, category, force

    /// The field a key names, matched on its bytes (no `String` per key).
    init?(key: [UInt8]) {
      for field in Self.allCases where field.name.utf8.elementsEqual(key) {
        self = field
        return
      }
      return nil
    }

    var name: String {
      switch self {
      case .id: "id"
      case .channel: "channel"
      case .sender: "sender"
      case .ts: "ts"
      case .kind: "kind"
      case .mentions: "mentions"
      case .mentionAll: "mention_all"
      case .replyTo: "reply_to"
      case .category: "category"
      case .force: "force"
      }
    }
  }

  private struct Rejected: Error { let reason: String }

  /// Parses one line (without its line end) as line number `line`. Blank
  /// lines are skipped; anything else becomes a message or a rejection.
  public func parse(_ bytes: UnsafeRawBufferPointer, line: Int, into batch: inout MessageBatch) {
    if bytes.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0D }) { return }
    do {
      try parseMessage(bytes, line: line, into: &batch)
    } catch {
      batch.rejections.append(Rejection(line: line, reason: error.reason))
    }
  }

  private func parseMessage(
    _ bytes: UnsafeRawBufferPointer, line: Int, into batch: inout MessageBatch
  )
    throws(Rejected)
  {
    // Pass 1: syntax, and where each known field's value is (the last one wins).
    var ranges = [Range<Int>?](repeating: nil, count: Field.allCases.count)
    var scanner = JSONScanner(bytes)
    do throws(JSONScanner.Failure) {
      try scanner.object { key, range in
        if let field = Field(key: key) { ranges[field.rawValue] = range }
      }
      scanner.skipWhitespace()
      guard scanner.i == bytes.count else { throw scanner.fail("trailing characters") }
    } catch {
      throw Rejected(reason: error.reason)
    }

    // Pass 2: types and meaning. JSON null in an optional field means absent.
    let values = Values(bytes: bytes, ranges: ranges)
    guard let id = try values.string(.id) else { throw Rejected(reason: "missing field 'id'") }
    guard let channelName = try values.string(.channel) else {
      throw Rejected(reason: "missing field 'channel'")
    }
    guard let ts = try values.timestamp() else { throw Rejected(reason: "missing field 'ts'") }
    let sender = try values.string(.sender)
    let kind: MessageKind
    if let name = try values.string(.kind) {
      guard let k = MessageKind(name: String(decoding: name, as: UTF8.self)) else {
        throw Rejected(reason: "unknown kind '\(String(decoding: name, as: UTF8.self))'")
      }
      kind = k
    } else {
      kind = .message
    }
    let mentionNames = try values.stringArray(.mentions)
    let mentionAll = try values.bool(.mentionAll) ?? false
    let replyTo = try values.string(.replyTo)
    let categoryName = try values.string(.category)
    let force = try values.bool(.force) ?? false

    guard let channel = find(index.channels, channelName) else {
      throw Rejected(reason: "unknown channel '\(String(decoding: channelName, as: UTF8.self))'")
    }
    var category: Int32 = -1
    if let categoryName {
      guard let c = find(index.categories, categoryName) else {
        throw Rejected(
          reason: "unknown category '\(String(decoding: categoryName, as: UTF8.self))'")
      }
      category = c
    }

    batch.lines.append(line)
    id.withUnsafeBytes { batch.idJSON.appendQuoted($0) }
    batch.channel.append(channel)
    batch.sender.append(sender.flatMap { find(index.users, $0) } ?? -1)
    batch.ts.append(ts)
    batch.kind.append(kind)
    batch.mentionAll.append(mentionAll)
    batch.force.append(force)
    batch.replyTo.append(replyTo.flatMap { find(index.users, $0) } ?? -1)
    batch.category.append(category)
    let first = batch.mentions.count
    for name in mentionNames ?? [] {
      if let row = find(index.users, name) { batch.mentions.append(row) }
    }
    batch.mentions[first...].sort()
    // Drop repeated mentions of one user.
    var kept = first
    for i in first..<batch.mentions.count
    where i == first || batch.mentions[i] != batch.mentions[kept - 1] {
      batch.mentions[kept] = batch.mentions[i]
      kept += 1
    }
    batch.mentions.removeLast(batch.mentions.count - kept)
    batch.mentionOffsets.append(Int32(batch.mentions.count))
  }

  private func find(_ table: StringTable, _ name: [UInt8]) -> Int32? {
    name.withUnsafeBytes { table.find($0) }
  }

  /// Typed access to the captured field values.
  private struct Values {
    let bytes: UnsafeRawBufferPointer
    let ranges: [Range<Int>?]

    func scanner(_ field: Field) -> JSONScanner? {
      guard let range = ranges[field.rawValue] else { return nil }
      var s = JSONScanner(UnsafeRawBufferPointer(rebasing: bytes[..<range.upperBound]))
      s.i = range.lowerBound
      if s.peek == UInt8(ascii: "n") { return nil }  // null
      return s
    }

    func wrongType(_ field: Field, _ expected: String) -> Rejected {
      Rejected(reason: "field '\(field.name)' must be \(expected)")
    }

    func string(_ field: Field) throws(Rejected) -> [UInt8]? {
      guard var s = scanner(field) else { return nil }
      guard s.peek == UInt8(ascii: "\"") else { throw wrongType(field, "a string") }
      var out: [UInt8] = []
      do { try s.string(into: &out) } catch { throw Rejected(reason: error.reason) }
      return out
    }

    func bool(_ field: Field) throws(Rejected) -> Bool? {
      guard let s = scanner(field) else { return nil }
      switch s.peek {
      case UInt8(ascii: "t"): return true
      case UInt8(ascii: "f"): return false
      default: throw wrongType(field, "true or false")
      }
    }

    func stringArray(_ field: Field) throws(Rejected) -> [[UInt8]]? {
      guard var s = scanner(field) else { return nil }
      guard s.peek == UInt8(ascii: "[") else { throw wrongType(field, "an array of strings") }
      s.i += 1
      var result: [[UInt8]] = []
      s.skipWhitespace()
      if s.peek == UInt8(ascii: "]") { return result }
      while true {
        s.skipWhitespace()
        guard s.peek == UInt8(ascii: "\"") else { throw wrongType(field, "an array of strings") }
        var out: [UInt8] = []
        do { try s.string(into: &out) } catch { throw Rejected(reason: error.reason) }
        result.append(out)
        s.skipWhitespace()
        if s.peek == UInt8(ascii: ",") {
          s.i += 1
          continue
        }
        return result
      }
    }

    /// Unix ms from an integer (no fraction, no exponent) or an RFC 3339 string.
    func timestamp() throws(Rejected) -> Int64? {
      guard var s = scanner(.ts) else { return nil }
      if s.peek == UInt8(ascii: "\"") {
        var out: [UInt8] = []
        do { try s.string(into: &out) } catch { throw Rejected(reason: error.reason) }
        guard let millis = RFC3339.parse(out) else {
          throw Rejected(
            reason:
              "field 'ts' is not an RFC 3339 date-time with a zone offset: '\(String(decoding: out, as: UTF8.self))'"
          )
        }
        return millis
      }
      guard let c = s.peek, c == UInt8(ascii: "-") || (c >= 0x30 && c <= 0x39) else {
        throw wrongType(.ts, "an integer (Unix ms) or an RFC 3339 string")
      }
      let shape: JSONScanner.NumberShape
      do { shape = try s.number() } catch { throw Rejected(reason: error.reason) }
      guard shape.isInteger else {
        throw wrongType(.ts, "an integer (Unix ms), without fraction or exponent")
      }
      guard let value = Int64(String(decoding: bytes[shape.range], as: UTF8.self)) else {
        throw Rejected(reason: "field 'ts' is out of range")
      }
      return value
    }
  }
}
