import FanoutIndex
import FanoutModel

/// Turns traffic lines into a `MessageBatch`, rejecting what the contract rejects.
public struct TrafficParser {
  let index: Index
  // Scratch space reused from line to line, so parsing allocates only to
  // grow the batch.
  private var ranges = [Range<Int>?](repeating: nil, count: Field.all.count)
  private var key: [UInt8] = []
  private var text: [UInt8] = []
  private var quotedID: [UInt8] = []
  private var mentionRows: [Int32] = []

  public init(index: Index) { self.index = index }

  private static let kinds = MessageKind.allCases

  private enum Field: Int, CaseIterable {
    case id, channel, sender, ts, kind, mentions, mentionAll, replyTo, category, force

    /// `allCases` builds a new array on every call; this one is built once.
    static let all = Field.allCases

    /// The field a key names, matched on its bytes (no `String` per key).
    init?(key: [UInt8]) {
      for field in Self.all where field.name.utf8.elementsEqual(key) {
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
  public mutating func parse(
    _ bytes: UnsafeRawBufferPointer, line: Int, into batch: inout MessageBatch
  ) {
    if bytes.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0D }) { return }
    do {
      try parseMessage(bytes, line: line, into: &batch)
    } catch {
      batch.rejections.append(Rejection(line: line, reason: error.reason))
    }
  }

  private mutating func parseMessage(
    _ bytes: UnsafeRawBufferPointer, line: Int, into batch: inout MessageBatch
  )
    throws(Rejected)
  {
    // Pass 1: syntax, and where each known field's value is (the last one wins).
    for i in ranges.indices { ranges[i] = nil }
    var scanner = JSONScanner(bytes)
    do throws(JSONScanner.Failure) {
      try scanner.object(key: &key) { key, range in
        if let field = Field(key: key) { ranges[field.rawValue] = range }
      }
      scanner.skipWhitespace()
      guard scanner.i == bytes.count else { throw scanner.fail("trailing characters") }
    } catch {
      throw Rejected(reason: error.reason)
    }

    // Pass 2: types and meaning. JSON null in an optional field means absent.
    // Every type is checked before any name is looked up. The scratch arrays
    // are moved out of self for the duration (no copy), so closures may use them.
    let values = Values(bytes: bytes, ranges: ranges)
    var text: [UInt8] = []
    var mentionRows: [Int32] = []
    swap(&text, &self.text)
    swap(&mentionRows, &self.mentionRows)
    defer {
      swap(&text, &self.text)
      swap(&mentionRows, &self.mentionRows)
    }
    guard try values.string(.id, into: &text) else { throw Rejected(reason: "missing field 'id'") }
    quotedID.removeAll(keepingCapacity: true)
    text.withUnsafeBytes { JSONText.appendQuoted($0, to: &quotedID) }
    guard try values.string(.channel, into: &text) else {
      throw Rejected(reason: "missing field 'channel'")
    }
    let channel = find(index.channels, text)
    guard let ts = try values.timestamp() else { throw Rejected(reason: "missing field 'ts'") }
    let sender = try values.string(.sender, into: &text) ? find(index.users, text) ?? -1 : -1
    var kind = MessageKind.message
    if try values.string(.kind, into: &text) {
      guard let k = Self.kinds.first(where: { $0.name.utf8.elementsEqual(text) }) else {
        throw Rejected(reason: "unknown kind '\(String(decoding: text, as: UTF8.self))'")
      }
      kind = k
    }
    mentionRows.removeAll(keepingCapacity: true)
    try values.forEachString(.mentions, into: &text) { name in
      if let row = find(index.users, name) { mentionRows.append(row) }
    }
    let mentionAll = try values.bool(.mentionAll) ?? false
    let replyTo = try values.string(.replyTo, into: &text) ? find(index.users, text) ?? -1 : -1
    var category: Int32 = -1
    let hasCategory = try values.string(.category, into: &text)
    if hasCategory { category = find(index.categories, text) ?? -2 }
    let force = try values.bool(.force) ?? false

    guard let channel else {
      _ = try values.string(.channel, into: &text)
      throw Rejected(reason: "unknown channel '\(String(decoding: text, as: UTF8.self))'")
    }
    guard category != -2 else {
      _ = try values.string(.category, into: &text)
      throw Rejected(reason: "unknown category '\(String(decoding: text, as: UTF8.self))'")
    }

    batch.lines.append(line)
    batch.idJSON.append(quotedID)
    batch.channel.append(channel)
    batch.sender.append(sender)
    batch.ts.append(ts)
    batch.kind.append(kind)
    batch.mentionAll.append(mentionAll)
    batch.force.append(force)
    batch.replyTo.append(replyTo)
    batch.category.append(category)
    // Mentioned rows sorted, each user once.
    mentionRows.sort()
    for (i, row) in mentionRows.enumerated() where i == 0 || row != mentionRows[i - 1] {
      batch.mentions.append(row)
    }
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

    /// Decodes a string field into `out`; false when absent or null.
    func string(_ field: Field, into out: inout [UInt8]) throws(Rejected) -> Bool {
      guard var s = scanner(field) else { return false }
      guard s.peek == UInt8(ascii: "\"") else { throw wrongType(field, "a string") }
      out.removeAll(keepingCapacity: true)
      do { try s.string(into: &out) } catch { throw Rejected(reason: error.reason) }
      return true
    }

    func bool(_ field: Field) throws(Rejected) -> Bool? {
      guard let s = scanner(field) else { return nil }
      switch s.peek {
      case UInt8(ascii: "t"): return true
      case UInt8(ascii: "f"): return false
      default: throw wrongType(field, "true or false")
      }
    }

    /// Calls `body` with each string of an array field, decoded into `out`;
    /// nothing when the field is absent or null.
    func forEachString(_ field: Field, into out: inout [UInt8], _ body: ([UInt8]) -> Void)
      throws(Rejected)
    {
      guard var s = scanner(field) else { return }
      guard s.peek == UInt8(ascii: "[") else { throw wrongType(field, "an array of strings") }
      s.i += 1
      s.skipWhitespace()
      if s.peek == UInt8(ascii: "]") { return }
      while true {
        s.skipWhitespace()
        guard s.peek == UInt8(ascii: "\"") else { throw wrongType(field, "an array of strings") }
        out.removeAll(keepingCapacity: true)
        do { try s.string(into: &out) } catch { throw Rejected(reason: error.reason) }
        body(out)
        s.skipWhitespace()
        if s.peek == UInt8(ascii: ",") {
          s.i += 1
          continue
        }
        return
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
