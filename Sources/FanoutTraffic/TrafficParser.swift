import FanoutIndex
import FanoutModel

/// Turns traffic lines into a `MessageBatch`, rejecting what the contract rejects.
///
/// `parse` checks each line and keeps the names it carries; `finish` looks
/// all the batch's channel and user names up at once (`StringTable.find(batch:)`:
/// the cache misses of a thousand lines overlap instead of following one
/// another) and returns the batch, unknown channels rejected in line order.
public struct TrafficParser {
  let index: Index
  private var batch = MessageBatch()
  /// One channel name per parsed message; `batch.channel` is filled by `finish`.
  private var channelNames = BytePool()
  /// Senders, reply_tos and mentions; until `finish`, `batch.sender`,
  /// `batch.replyTo` and `batch.mentions` hold positions in this pool (or -1).
  private var userNames = BytePool()
  /// Messages whose category is unknown (`batch.category` -2), with its name.
  private var unknownCategories: [Int: String] = [:]
  // Scratch space reused from line to line, so parsing allocates only to
  // grow the batch.
  private var ranges = [Range<Int>?](repeating: nil, count: Field.all.count)
  private var key: [UInt8] = []
  private let scratch = Scratch()

  /// A class, so that parsing can fill it while it appends to the parser's
  /// batch. Its fields are passed `inout` several times per line: unchecked,
  /// they cost no runtime exclusivity bookkeeping (measured: 15% of parsing).
  /// Safe because each field's uses in `parseMessage` follow one another,
  /// on the one thread that owns the parser.
  private final class Scratch {
    @exclusivity(unchecked) var text: [UInt8] = []
    @exclusivity(unchecked) var channel: [UInt8] = []
    @exclusivity(unchecked) var sender: [UInt8] = []
    @exclusivity(unchecked) var replyTo: [UInt8] = []
    @exclusivity(unchecked) var quotedID: [UInt8] = []
    @exclusivity(unchecked) var thread: [UInt8] = []
    @exclusivity(unchecked) var mentions = BytePool()
  }

  public init(index: Index) { self.index = index }

  private static let kinds = MessageKind.allCases

  private enum Field: Int, CaseIterable {
    case id, channel, sender, ts, kind, mentions, mentionAll, replyTo, category, force, silent,
      thread

    /// `allCases` builds a new array on every call; this one is built once.
    static let all = Field.allCases

    /// The field a key names, matched on its bytes (no `String` per key).
    init?(key: [UInt8]) {
      for field in Self.all where Self.names[field.rawValue] == key {
        self = field
        return
      }
      return nil
    }

    /// Each field's name as bytes, compared with `==` (length first, then memory).
    static let names = all.map { Array($0.name.utf8) }

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
      case .silent: "silent"
      case .thread: "thread"
      }
    }
  }

  private struct Rejected: Error { let reason: String }

  /// Parses one line (without its line end) as line number `line`. Blank
  /// lines are skipped; anything else becomes a message or a rejection.
  public mutating func parse(_ bytes: UnsafeRawBufferPointer, line: Int) {
    if bytes.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0D }) { return }
    do {
      try parseMessage(bytes, line: line)
    } catch {
      batch.rejections.append(Rejection(line: line, reason: error.reason))
    }
  }

  /// Rejects line number `line` without reading it (a line over the length limit).
  public mutating func reject(line: Int, reason: String) {
    batch.rejections.append(Rejection(line: line, reason: reason))
  }

  /// The messages parsed since the last `finish`, their names looked up;
  /// the parser starts a new batch.
  public mutating func finish() -> MessageBatch {
    var channels: [Int32] = []
    var users: [Int32] = []
    index.channels.find(batch: channelNames, into: &channels)
    index.users.find(batch: userNames, into: &users)
    var parsed = MessageBatch()
    swap(&parsed, &batch)
    defer {
      channelNames.removeAll()
      userNames.removeAll()
      unknownCategories.removeAll()
    }

    func user(_ position: Int32) -> Int32 { position < 0 ? -1 : users[Int(position)] }
    var done = MessageBatch()
    done.rejections = parsed.rejections
    done.reserveCapacity(
      parsed.count, idBytes: parsed.idJSON.bytes.count, threadBytes: parsed.thread.bytes.count)
    var mentionRows: [Int32] = []
    for m in 0..<parsed.count {
      guard channels[m] >= 0 else {
        done.rejections.append(
          Rejection(
            line: parsed.lines[m], reason: "unknown channel '\(channelNames.string(m))'"))
        continue
      }
      if let category = unknownCategories[m] {
        done.rejections.append(
          Rejection(line: parsed.lines[m], reason: "unknown category '\(category)'"))
        continue
      }
      done.lines.append(parsed.lines[m])
      parsed.idJSON.withBytes(m) { done.idJSON.append($0) }
      done.channel.append(channels[m])
      done.sender.append(user(parsed.sender[m]))
      done.ts.append(parsed.ts[m])
      done.kind.append(parsed.kind[m])
      done.mentionAll.append(parsed.mentionAll[m])
      done.force.append(parsed.force[m])
      done.silent.append(parsed.silent[m])
      parsed.thread.withBytes(m) { done.thread.append($0) }
      done.hasThread.append(parsed.hasThread[m])
      done.replyTo.append(user(parsed.replyTo[m]))
      done.category.append(parsed.category[m])
      // Mentioned rows sorted, each user once; unknown users dropped.
      mentionRows.removeAll(keepingCapacity: true)
      for position in parsed.mentions(of: m) where users[Int(position)] >= 0 {
        mentionRows.append(users[Int(position)])
      }
      mentionRows.sort()
      for (i, row) in mentionRows.enumerated() where i == 0 || row != mentionRows[i - 1] {
        done.mentions.append(row)
      }
      done.mentionOffsets.append(Int32(done.mentions.count))
    }
    if done.rejections.count > parsed.rejections.count {
      done.rejections.sort { $0.line < $1.line }
    }
    return done
  }

  private mutating func parseMessage(_ bytes: UnsafeRawBufferPointer, line: Int) throws(Rejected) {
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
      if bytes.starts(with: [0xEF, 0xBB, 0xBF]) {
        throw Rejected(
          reason: "invalid JSON: the line starts with a UTF-8 byte order mark (EF BB BF), "
            + "which JSON text must not have; remove it")
      }
      throw Rejected(reason: error.reason)
    }

    // Pass 2: types and meaning. JSON null in an optional field means absent.
    // Every type is checked before the message is kept; names are looked up
    // by `finish`.
    let values = Values(bytes: bytes, ranges: ranges)
    let scratch = self.scratch
    guard try values.string(.id, into: &scratch.text) else {
      throw Rejected(reason: "missing field 'id'")
    }
    scratch.quotedID.removeAll(keepingCapacity: true)
    scratch.text.withUnsafeBytes { JSONText.appendQuoted($0, to: &scratch.quotedID) }
    guard try values.string(.channel, into: &scratch.channel) else {
      throw Rejected(reason: "missing field 'channel'")
    }
    guard let ts = try values.timestamp() else { throw Rejected(reason: "missing field 'ts'") }
    let hasSender = try values.string(.sender, into: &scratch.sender)
    var kind = MessageKind.message
    if try values.string(.kind, into: &scratch.text) {
      guard let k = Self.kinds.first(where: { $0.name.utf8.elementsEqual(scratch.text) }) else {
        throw Rejected(reason: "unknown kind '\(String(decoding: scratch.text, as: UTF8.self))'")
      }
      kind = k
    }
    scratch.mentions.removeAll()
    try values.forEachString(.mentions, into: &scratch.text) { scratch.mentions.append($0) }
    let mentionAll = try values.bool(.mentionAll) ?? false
    let hasReplyTo = try values.string(.replyTo, into: &scratch.replyTo)
    var category: Int32 = -1
    if try values.string(.category, into: &scratch.text) {
      category = scratch.text.withUnsafeBytes { index.categories.find($0) } ?? -2
    }
    let force = try values.bool(.force) ?? false
    let silent = try values.bool(.silent) ?? false
    let hasThread = try values.string(.thread, into: &scratch.thread)

    // Kept: the names wait for `finish`.
    let m = batch.count
    if category == -2 { unknownCategories[m] = String(decoding: scratch.text, as: UTF8.self) }
    scratch.channel.withUnsafeBytes { channelNames.append($0) }
    batch.lines.append(line)
    scratch.quotedID.withUnsafeBytes { batch.idJSON.append($0) }
    batch.sender.append(hasSender ? keepUser(scratch.sender) : -1)
    batch.ts.append(ts)
    batch.kind.append(kind)
    batch.mentionAll.append(mentionAll)
    batch.force.append(force)
    batch.silent.append(silent)
    if hasThread {
      scratch.thread.withUnsafeBytes { batch.thread.append($0) }
    } else {
      batch.thread.append(UnsafeRawBufferPointer(start: nil, count: 0))
    }
    batch.hasThread.append(hasThread)
    batch.replyTo.append(hasReplyTo ? keepUser(scratch.replyTo) : -1)
    batch.category.append(category)
    for k in 0..<scratch.mentions.count {
      batch.mentions.append(Int32(userNames.count))
      scratch.mentions.withBytes(k) { userNames.append($0) }
    }
    batch.mentionOffsets.append(Int32(batch.mentions.count))
  }

  /// Keeps a user name for `finish`; returns its position.
  private mutating func keepUser(_ name: [UInt8]) -> Int32 {
    defer { name.withUnsafeBytes { userNames.append($0) } }
    return Int32(userNames.count)
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
