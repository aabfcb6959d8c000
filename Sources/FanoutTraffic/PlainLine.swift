import FanoutModel

/// Reads a traffic line of the shape nearly every producer writes — one
/// object of known fields, strings of printable ASCII without escapes, an
/// integer or RFC 3339 `ts` — in one pass, finding each string's end eight
/// bytes at a time, and without copying: `LineFields` point into the line.
///
/// It takes only what it can read exactly as the general parser reads it.
/// Anything else — an escape or a non-ASCII byte in a string, a `ts` that
/// is not a date-time, a value of another type, a repeated or missing
/// field, an unknown kind, a syntax error — makes `read` return false, and
/// the general parser reads the line and words any rejection. (Unknown fields are
/// skipped here with the general scanner's own syntax check.) The
/// differential tests hold the two to the same results.
struct PlainLine {
  private let bytes: UnsafeRawBufferPointer
  private var i = 0

  init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

  private static let quote = UInt8(ascii: "\"")
  private static let required: UInt16 =
    1 << Field.id.rawValue | 1 << Field.channel.rawValue | 1 << Field.ts.rawValue

  /// Fills `fields` from the line; false when the line is not plain (and
  /// `fields` then means nothing).
  mutating func read(into fields: inout LineFields) -> Bool {
    fields.clear()
    var seen: UInt16 = 0
    skipWhitespace()
    guard take(UInt8(ascii: "{")) else { return false }
    repeat {
      skipWhitespace()
      guard take(Self.quote), let key = plainString() else { return false }
      skipWhitespace()
      guard take(UInt8(ascii: ":")) else { return false }
      skipWhitespace()
      if let field = field(named: key) {
        let bit: UInt16 = 1 << field.rawValue
        guard seen & bit == 0, value(of: field, into: &fields) else { return false }
        seen |= bit
      } else {
        guard skipValue() else { return false }
      }
      skipWhitespace()
    } while take(UInt8(ascii: ","))
    guard take(UInt8(ascii: "}")) else { return false }
    skipWhitespace()
    return i == bytes.count && seen & Self.required == Self.required
  }

  /// The field the key at `key` names. A key of up to eight bytes is read
  /// as one word, its bytes past the key masked off, when the line holds
  /// eight bytes from the key's start (all but the shortest lines do).
  @inline(__always)
  private func field(named key: Range<Int>) -> Field? {
    guard key.count <= 8, key.lowerBound + 8 <= bytes.count else {
      return Field(key: UnsafeRawBufferPointer(rebasing: bytes[key]))
    }
    let word = UInt64(
      littleEndian: bytes.baseAddress!.loadUnaligned(
        fromByteOffset: key.lowerBound, as: UInt64.self))
    let mask: UInt64 = key.count == 8 ? ~0 : (1 << (8 * UInt64(key.count))) &- 1
    return Field(count: key.count, low: word & mask, high: 0)
  }

  /// Reads field `field`'s value; false when it is not of the plain shape.
  private mutating func value(of field: Field, into fields: inout LineFields) -> Bool {
    if i < bytes.count, bytes[i] == UInt8(ascii: "n"), takeLiteral("null") {
      // Absent, as in the general parser; a null id, channel or ts is the
      // general parser's to reject.
      return !(field == .id || field == .channel || field == .ts)
    }
    switch field {
    case .id, .channel, .sender, .replyTo, .thread, .category, .kind, .event, .user:
      guard take(Self.quote), let text = plainString() else { return false }
      switch field {
      // A read line is the general parser's: it reads other fields.
      case .event:
        return UnsafeRawBufferPointer(rebasing: bytes[text]).elementsEqual("message".utf8)
      case .user: return true  // an unknown field on a message line
      case .id: fields.id = text
      case .channel: fields.channel = text
      case .sender: fields.sender = text
      case .replyTo: fields.replyTo = text
      case .thread: fields.thread = text
      case .category: fields.category = text
      default:
        let name = UnsafeRawBufferPointer(rebasing: bytes[text])
        guard let kind = MessageKind(named: name) else { return false }
        fields.kind = kind
      }
      return true
    case .ts:
      if take(Self.quote) {
        // An RFC 3339 string: without escapes, its bytes are its text.
        guard let text = plainString(),
          let ts = RFC3339.parse(UnsafeRawBufferPointer(rebasing: bytes[text]))
        else { return false }
        fields.ts = ts
        return true
      }
      guard let ts = integer() else { return false }
      fields.ts = ts
      return true
    case .mentionAll, .force, .silent:
      let value: Bool
      if takeLiteral("true") {
        value = true
      } else if takeLiteral("false") {
        value = false
      } else {
        return false
      }
      switch field {
      case .mentionAll: fields.mentionAll = value
      case .force: fields.force = value
      default: fields.silent = value
      }
      return true
    case .mentions:
      guard take(UInt8(ascii: "[")) else { return false }
      skipWhitespace()
      if take(UInt8(ascii: "]")) { return true }
      repeat {
        skipWhitespace()
        guard take(Self.quote), let name = plainString() else { return false }
        fields.mentions.append(name)
        skipWhitespace()
      } while take(UInt8(ascii: ","))
      return take(UInt8(ascii: "]"))
    }
  }

  /// After an opening quote: the string's bytes, up to its closing quote
  /// (consumed), when all are printable ASCII or DEL — no escape, control
  /// character or UTF-8 sequence, which the general parser decodes; nil
  /// otherwise. Eight bytes a step, the special ones found by SWAR.
  private mutating func plainString() -> Range<Int>? {
    let start = i
    let base = bytes.baseAddress!
    while i + 8 <= bytes.count {
      let special = JSONScanner.specialBytes(
        UInt64(littleEndian: base.loadUnaligned(fromByteOffset: i, as: UInt64.self)))
      if special != 0 {
        i += special.trailingZeroBitCount >> 3
        return closeString(from: start)
      }
      i += 8
    }
    while i < bytes.count, bytes[i] >= 0x20, bytes[i] < 0x80, bytes[i] != Self.quote,
      bytes[i] != UInt8(ascii: "\\")
    { i += 1 }
    return closeString(from: start)
  }

  @inline(__always)
  private mutating func closeString(from start: Int) -> Range<Int>? {
    guard i < bytes.count, bytes[i] == Self.quote else { return nil }
    i += 1
    return start..<(i - 1)
  }

  /// An integer without fraction or exponent of at most 18 digits (so it
  /// fits Int64 without a check); nil for anything else, which the general
  /// parser reads or rejects (leading zeros, other numbers, strings).
  private mutating func integer() -> Int64? {
    let negative = take(UInt8(ascii: "-"))
    let start = i
    var value: Int64 = 0
    while i < bytes.count, bytes[i] &- 0x30 < 10 {
      value = value &* 10 &+ Int64(bytes[i] &- 0x30)
      i += 1
    }
    let digits = i - start
    guard digits > 0, digits <= 18, digits == 1 || bytes[start] != 0x30 else { return nil }
    if i < bytes.count,
      bytes[i] == UInt8(ascii: ".") || bytes[i] == UInt8(ascii: "e")
        || bytes[i] == UInt8(ascii: "E")
    {
      return nil
    }
    return negative ? -value : value
  }

  /// Skips an unknown field's value, checking its syntax as the general
  /// parser does.
  private mutating func skipValue() -> Bool {
    var scanner = JSONScanner(bytes)
    scanner.i = i
    do throws(JSONScanner.Failure) {
      try scanner.value(depth: 1)
    } catch {
      return false
    }
    i = scanner.i
    return true
  }

  @inline(__always)
  private mutating func skipWhitespace() {
    while i < bytes.count,
      bytes[i] == 0x20 || bytes[i] == 0x09 || bytes[i] == 0x0A || bytes[i] == 0x0D
    { i += 1 }
  }

  @inline(__always)
  private mutating func take(_ c: UInt8) -> Bool {
    guard i < bytes.count, bytes[i] == c else { return false }
    i += 1
    return true
  }

  private mutating func takeLiteral(_ word: StaticString) -> Bool {
    let n = word.utf8CodeUnitCount
    guard i + n <= bytes.count else { return false }
    for k in 0..<n where bytes[i + k] != word.utf8Start[k] { return false }
    i += n
    return true
  }
}
