/// FanoutTraffic owns the traffic format: newline-delimited JSON messages,
/// read from a file or standard input, validated strictly and resolved
/// against the index (channel, category and user rows), so that the kernel
/// sees only dense ids. Rejected lines are kept with their line number.
import FanoutIndex
import FanoutKernel
import FanoutModel

/// Turns traffic lines into a `MessageBatch`, rejecting what the contract rejects.
///
/// `parse` reads each line — in one pass when it has the common, plain
/// shape (`PlainLine`), with the general parser (`readFields`) otherwise,
/// which alone decides rejections — and keeps the names it carries; `finish` looks
/// all the batch's channel and user names up at once (`StringTable.find(batch:)`:
/// the cache misses of a thousand lines overlap instead of following one
/// another) and returns the batch, unknown channels rejected in line order.
public struct TrafficParser {
  let index: Index
  /// The fixed-size fields of one kept message: one append a line, spread
  /// into the batch's columns by `finish` (a dozen appends a line cost more
  /// than reading the line).
  private struct Kept {
    var line: Int
    var ts: Int64
    /// Positions in `userNames`, or -1.
    var sender: Int32
    var replyTo: Int32
    /// The category row, -1 (none) or -2 (unknown: see `unknownCategories`).
    var category: Int32
    /// Where the message's mentions end in `mentions`.
    var mentionsEnd: Int32
    var kind: MessageKind
    var mentionAll: Bool
    var force: Bool
    var silent: Bool
    var hasThread: Bool
  }
  private var kept: [Kept] = []
  private var rejections: [Rejection] = []
  /// One channel name per kept message; looked up by `finish`.
  private var channelNames = BytePool.Builder()
  /// Senders, reply_tos and mentions, looked up by `finish`.
  private var userNames = BytePool.Builder()
  /// Mentioned users, as positions in `userNames`.
  private var mentions: [Int32] = []
  private var idJSON = BytePool.Builder()
  private var threads = BytePool.Builder()
  /// Read lines kept: line, ts, the reader's position in `userNames`; their
  /// channel names and ids beside.
  private var keptReads: [(line: Int, ts: Int64, user: Int32)] = []
  private var readChannelNames = BytePool.Builder()
  private var readIdJSON = BytePool.Builder()
  /// Messages whose category is unknown, with its name.
  private var unknownCategories: [Int: String] = [:]
  // Scratch space reused from line to line, so parsing allocates only to
  // grow the batch.
  private var fields = LineFields()
  private var ranges = [Range<Int>?](repeating: nil, count: Field.all.count)
  private var key: [UInt8] = []
  /// The general parser's decoded strings, which its `fields` point into.
  private var decoded: [UInt8] = []
  /// Whether plain lines take the fast path (`PlainLine`); off only in the
  /// tests that hold the two paths to the same results.
  private let readsPlainLines: Bool
  /// How many lines took the fast path (for its tests).
  package private(set) var plainLinesRead = 0

  public init(index: Index) { self.init(index: index, readsPlainLines: true) }

  package init(index: Index, readsPlainLines: Bool) {
    self.index = index
    self.readsPlainLines = readsPlainLines
  }

  private struct Rejected: Error { let reason: String }

  /// Room for `lines` more messages of `bytes` bytes of text in all, so
  /// that the batch's columns grow once rather than doubling their way up
  /// (a line's channel, sender or id is about an eighth of it).
  public mutating func reserveCapacity(lines: Int, bytes: Int) {
    kept.reserveCapacity(kept.count + lines)
    channelNames.reserveCapacity(strings: lines, bytes: bytes / 8)
    userNames.reserveCapacity(strings: lines, bytes: bytes / 8)
    idJSON.reserveCapacity(strings: lines, bytes: bytes / 8)
    threads.reserveCapacity(strings: lines, bytes: 0)
  }

  /// Parses one line (without its line end) as line number `line`. Blank
  /// lines are skipped; anything else becomes a message or a rejection.
  public mutating func parse(_ bytes: UnsafeRawBufferPointer, line: Int) {
    var plain = PlainLine(bytes)
    if readsPlainLines && plain.read(into: &fields) {
      plainLinesRead += 1
      keep(bytes, line: line, plain: true)
      return
    }
    if bytes.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0D }) { return }
    do {
      try readFields(bytes)
    } catch {
      rejections.append(Rejection(line: line, reason: error.reason))
      return
    }
    decoded.withUnsafeBytes { keep($0, line: line, plain: false) }
  }

  /// Rejects line number `line` without reading it (a line over the length limit).
  public mutating func reject(line: Int, reason: String) {
    rejections.append(Rejection(line: line, reason: reason))
  }

  /// The messages parsed since the last `finish`, their names looked up;
  /// the parser starts a new batch.
  public mutating func finish() -> MessageBatch {
    var parsed = MessageBatch()
    parsed.rejections = rejections
    parsed.idJSON = idJSON.take()
    parsed.thread = threads.take()
    let channelNames = channelNames.take()
    var users: [Int32] = []
    index.channels.find(batch: channelNames, into: &parsed.channel)
    index.users.find(batch: userNames.take(), into: &users)
    let readsRejected = finishReads(users, into: &parsed)
    let unknownCategories = unknownCategories
    let kept = kept
    let mentions = mentions
    rejections.removeAll()
    self.unknownCategories.removeAll()
    self.kept.removeAll()
    self.mentions.removeAll()

    parsed.lines = kept.map { $0.line }
    parsed.ts = kept.map { $0.ts }
    parsed.kind = kept.map { $0.kind }
    parsed.mentionAll = kept.map { $0.mentionAll }
    parsed.force = kept.map { $0.force }
    parsed.silent = kept.map { $0.silent }
    parsed.hasThread = kept.map { $0.hasThread }
    parsed.category = kept.map { $0.category }
    // Positions in the user pool become rows (-1: unknown).
    parsed.sender = kept.map { $0.sender >= 0 ? users[Int($0.sender)] : -1 }
    parsed.replyTo = kept.map { $0.replyTo >= 0 ? users[Int($0.replyTo)] : -1 }
    // Mentioned rows sorted, each user once; unknown users dropped.
    parsed.mentionOffsets.reserveCapacity(kept.count + 1)
    if mentions.isEmpty {
      parsed.mentionOffsets.append(contentsOf: repeatElement(0, count: kept.count))
    } else {
      var rows: [Int32] = []
      var first = 0
      for message in kept {
        let end = Int(message.mentionsEnd)
        rows.removeAll(keepingCapacity: true)
        for k in first..<end where users[Int(mentions[k])] >= 0 {
          rows.append(users[Int(mentions[k])])
        }
        rows.sort()
        for (i, row) in rows.enumerated() where i == 0 || row != rows[i - 1] {
          parsed.mentions.append(row)
        }
        first = end
        parsed.mentionOffsets.append(Int32(parsed.mentions.count))
      }
    }

    // Messages in unknown channels or of unknown categories are rejected.
    guard parsed.channel.contains(-1) || !unknownCategories.isEmpty else {
      if readsRejected { parsed.rejections.sort { $0.line < $1.line } }
      return parsed
    }
    var done = MessageBatch()
    done.rejections = parsed.rejections
    done.reads = parsed.reads
    for m in 0..<parsed.count {
      if parsed.channel[m] < 0 {
        done.rejections.append(
          Rejection(
            line: parsed.lines[m],
            reason: "unknown channel \(Bounded.quoted(channelNames.string(m)))"))
      } else if let category = unknownCategories[m] {
        done.rejections.append(
          Rejection(line: parsed.lines[m], reason: "unknown category \(Bounded.quoted(category))"))
      } else {
        done.append(m, of: parsed)
      }
    }
    done.rejections.sort { $0.line < $1.line }
    return done
  }

  /// Moves the kept read lines into `parsed.reads`, their names looked up
  /// (`users`: rows by position in the user pool); a read of an unknown
  /// channel is rejected. Returns whether any was.
  private mutating func finishReads(_ users: [Int32], into parsed: inout MessageBatch) -> Bool {
    guard !keptReads.isEmpty else { return false }
    let names = readChannelNames.take()
    let ids = readIdJSON.take()
    var channels: [Int32] = []
    index.channels.find(batch: names, into: &channels)
    var rejected = false
    for (k, read) in keptReads.enumerated() {
      guard channels[k] >= 0 else {
        parsed.rejections.append(
          Rejection(line: read.line, reason: "unknown channel \(Bounded.quoted(names.string(k)))"))
        rejected = true
        continue
      }
      parsed.reads.lines.append(read.line)
      ids.withBytes(k) { parsed.reads.idJSON.append($0) }
      parsed.reads.channel.append(channels[k])
      parsed.reads.user.append(users[Int(read.user)])
      parsed.reads.ts.append(read.ts)
    }
    keptReads.removeAll()
    return rejected
  }

  /// The general parser: reads any line into `fields`, its strings decoded
  /// into `decoded`, or throws the reason the contract rejects it for.
  private mutating func readFields(_ bytes: UnsafeRawBufferPointer) throws(Rejected) {
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

    // Pass 2: types and meaning, in field order (which decides the reason
    // given when several are wrong). JSON null in an optional field means
    // absent. Names are looked up when the message is kept.
    let values = Values(bytes: bytes, ranges: ranges)
    fields.clear()
    decoded.removeAll(keepingCapacity: true)
    // Contract v3: the event says which fields the line has.
    if let event = try values.string(.event, into: &decoded) {
      let name = decoded[event]
      if name.elementsEqual("read".utf8) {
        fields.isRead = true
      } else if !name.elementsEqual("message".utf8) {
        throw Rejected(
          reason: "unknown event \(Bounded.quoted(String(decoding: name, as: UTF8.self))) "
            + "(expected 'message' or 'read')")
      }
    }
    guard let id = try values.string(.id, into: &decoded) else {
      throw Rejected(reason: "missing field 'id'")
    }
    fields.id = id
    guard let channel = try values.string(.channel, into: &decoded) else {
      throw Rejected(reason: "missing field 'channel'")
    }
    fields.channel = channel
    guard let ts = try values.timestamp() else { throw Rejected(reason: "missing field 'ts'") }
    fields.ts = ts
    if fields.isRead {
      // A read line's other fields are not checked.
      guard let user = try values.string(.user, into: &decoded) else {
        throw Rejected(reason: "missing field 'user' (a read line names its reader)")
      }
      fields.user = user
      return
    }
    fields.sender = try values.string(.sender, into: &decoded)
    if let kind = try values.string(.kind, into: &decoded) {
      let name = decoded[kind]
      guard let k = MessageKind(named: name) else {
        throw Rejected(
          reason: "unknown kind \(Bounded.quoted(String(decoding: name, as: UTF8.self)))")
      }
      fields.kind = k
    }
    try values.forEachString(.mentions, into: &decoded) { fields.mentions.append($0) }
    fields.mentionAll = try values.bool(.mentionAll) ?? false
    fields.replyTo = try values.string(.replyTo, into: &decoded)
    fields.category = try values.string(.category, into: &decoded)
    fields.force = try values.bool(.force) ?? false
    fields.silent = try values.bool(.silent) ?? false
    fields.thread = try values.string(.thread, into: &decoded)
  }

  /// Keeps the message `fields` describe, their strings in `text`; its
  /// names wait for `finish`. A `plain` line's strings need no escape.
  private mutating func keep(_ text: UnsafeRawBufferPointer, line: Int, plain: Bool) {
    func bytes(_ range: Range<Int>) -> UnsafeRawBufferPointer {
      UnsafeRawBufferPointer(rebasing: text[range])
    }
    if fields.isRead, let user = fields.user {
      readChannelNames.append(bytes(fields.channel))
      readIdJSON.appendQuoted(bytes(fields.id))
      keptReads.append((line, fields.ts, keepUser(bytes(user))))
      return
    }
    var category: Int32 = -1
    if let name = fields.category {
      category = index.categories.find(bytes(name)) ?? -2
      if category == -2 {
        unknownCategories[kept.count] = String(decoding: bytes(name), as: UTF8.self)
      }
    }
    channelNames.append(bytes(fields.channel))
    if plain {
      idJSON.appendQuotedPlain(bytes(fields.id))
    } else {
      idJSON.appendQuoted(bytes(fields.id))
    }
    threads.append(fields.thread.map(bytes) ?? UnsafeRawBufferPointer(start: nil, count: 0))
    let sender = fields.sender.map { keepUser(bytes($0)) } ?? -1
    let replyTo = fields.replyTo.map { keepUser(bytes($0)) } ?? -1
    for name in fields.mentions {
      mentions.append(keepUser(bytes(name)))
    }
    kept.append(
      Kept(
        line: line, ts: fields.ts, sender: sender, replyTo: replyTo, category: category,
        mentionsEnd: Int32(mentions.count), kind: fields.kind, mentionAll: fields.mentionAll,
        force: fields.force, silent: fields.silent, hasThread: fields.thread != nil))
  }

  /// Keeps a user name for `finish`; returns its position.
  private mutating func keepUser(_ name: UnsafeRawBufferPointer) -> Int32 {
    userNames.append(name)
    return Int32(userNames.count - 1)
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

    /// Decodes a string field onto the end of `out`, and returns where it
    /// lies there; nil when absent or null.
    func string(_ field: Field, into out: inout [UInt8]) throws(Rejected) -> Range<Int>? {
      guard var s = scanner(field) else { return nil }
      guard s.peek == UInt8(ascii: "\"") else { throw wrongType(field, "a string") }
      let start = out.count
      do { try s.string(into: &out) } catch { throw Rejected(reason: error.reason) }
      return start..<out.count
    }

    func bool(_ field: Field) throws(Rejected) -> Bool? {
      guard let s = scanner(field) else { return nil }
      switch s.peek {
      case UInt8(ascii: "t"): return true
      case UInt8(ascii: "f"): return false
      default: throw wrongType(field, "true or false")
      }
    }

    /// Calls `body` with where each string of an array field lies once
    /// decoded onto the end of `out`; nothing when absent or null.
    func forEachString(_ field: Field, into out: inout [UInt8], _ body: (Range<Int>) -> Void)
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
        let start = out.count
        do { try s.string(into: &out) } catch { throw Rejected(reason: error.reason) }
        body(start..<out.count)
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
              "field 'ts' is not an RFC 3339 date-time with a zone offset: \(Bounded.quoted(String(decoding: out, as: UTF8.self)))"
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
