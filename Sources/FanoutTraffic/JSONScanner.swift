/// A strict JSON (RFC 8259) scanner over one line's bytes: validates syntax,
/// decodes strings, and reports where each top-level value lies, without
/// building a tree. Invalid UTF-8, unescaped control characters, lone
/// surrogates and leading zeros are errors, as in the RFC.
package struct JSONScanner {
  package struct Failure: Error { package let reason: String }

  package let bytes: UnsafeRawBufferPointer
  package var i = 0
  @usableFromInline static let maxDepth = 256

  package init(_ bytes: UnsafeRawBufferPointer) { self.bytes = bytes }

  @inlinable package var peek: UInt8? { i < bytes.count ? bytes[i] : nil }

  @inlinable @inline(__always)
  package mutating func skipWhitespace() {
    while i < bytes.count,
      bytes[i] == 0x20 || bytes[i] == 0x09 || bytes[i] == 0x0A || bytes[i] == 0x0D
    { i += 1 }
  }

  @usableFromInline @inline(never)
  package func fail(_ what: String) -> Failure {
    Failure(reason: "invalid JSON: \(what) at byte \(i + 1)")
  }

  @inlinable @inline(__always)
  package mutating func expect(_ c: UInt8) throws(Failure) {
    guard i < bytes.count && bytes[i] == c else { throw expected(c) }
    i += 1
  }

  @usableFromInline @inline(never)
  func expected(_ c: UInt8) -> Failure { fail("expected '\(Character(Unicode.Scalar(c)))'") }

  /// Scans `{ "key": value, ... }`, calling `field` with each key's bytes
  /// and the byte range of its value. A key without escapes is handed over
  /// where it lies; one with escapes is decoded into `key` (scratch space
  /// the caller reuses) first.
  @inlinable
  package mutating func object(
    key: inout [UInt8], _ field: (UnsafeRawBufferPointer, Range<Int>) -> Void
  ) throws(Failure) {
    try object(key: &key) { (key, scanner: inout JSONScanner) throws(Failure) in
      let start = scanner.i
      try scanner.value(depth: 1)
      field(key, start..<scanner.i)
    }
  }

  /// `object(key:_:)` where `field` reads each value itself: it is called
  /// with the scanner at the value and leaves it after the value.
  @inlinable
  package mutating func object(
    key: inout [UInt8],
    reading field: (UnsafeRawBufferPointer, inout JSONScanner) throws(Failure) -> Void
  ) throws(Failure) {
    skipWhitespace()
    try expect(UInt8(ascii: "{"))
    skipWhitespace()
    if peek == UInt8(ascii: "}") {
      i += 1
      return
    }
    while true {
      skipWhitespace()
      let keyStart = i
      var unused: [UInt8] = []
      let escaped = try string(into: &unused, keeping: false)
      let keyEnd = i
      skipWhitespace()
      try expect(UInt8(ascii: ":"))
      skipWhitespace()
      if escaped {
        var decoder = JSONScanner(bytes)
        decoder.i = keyStart
        key.removeAll(keepingCapacity: true)
        try decoder.string(into: &key)
        var failure: Failure? = nil
        key.withUnsafeBytes { key in
          do throws(Failure) { try field(key, &self) } catch { failure = error }
        }
        if let failure { throw failure }
      } else {
        try field(UnsafeRawBufferPointer(rebasing: bytes[(keyStart + 1)..<(keyEnd - 1)]), &self)
      }
      skipWhitespace()
      if peek == UInt8(ascii: ",") {
        i += 1
        continue
      }
      try expect(UInt8(ascii: "}"))
      return
    }
  }

  /// Skips any value, checking its syntax.
  @inlinable
  package mutating func value(depth: Int) throws(Failure) {
    guard depth <= Self.maxDepth else { throw fail("nesting too deep") }
    guard let c = peek else { throw fail("missing value") }
    switch c {
    case UInt8(ascii: "{"): try skipMembers(closedBy: UInt8(ascii: "}"), keyed: true, depth: depth)
    case UInt8(ascii: "["): try skipMembers(closedBy: UInt8(ascii: "]"), keyed: false, depth: depth)
    case UInt8(ascii: "\""):
      try skipString()
    case UInt8(ascii: "t"): try literal("true")
    case UInt8(ascii: "f"): try literal("false")
    case UInt8(ascii: "n"): try literal("null")
    case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): _ = try number()
    default: throw fail("unexpected character")
    }
  }

  /// Skips an object's members (`keyed`) or an array's elements, from its
  /// opening bracket through `close`, checking their syntax.
  @inlinable
  mutating func skipMembers(closedBy close: UInt8, keyed: Bool, depth: Int) throws(Failure) {
    i += 1
    skipWhitespace()
    if peek == close {
      i += 1
      return
    }
    while true {
      skipWhitespace()
      if keyed {
        try skipString()
        skipWhitespace()
        try expect(UInt8(ascii: ":"))
        skipWhitespace()
      }
      try value(depth: depth + 1)
      skipWhitespace()
      if peek == UInt8(ascii: ",") {
        i += 1
        continue
      }
      try expect(close)
      return
    }
  }

  @inlinable
  package mutating func literal(_ word: StaticString) throws(Failure) {
    let n = word.utf8CodeUnitCount
    guard i + n <= bytes.count else { throw fail("bad literal") }
    for k in 0..<n where bytes[i + k] != word.utf8Start[k] { throw fail("bad literal") }
    i += n
  }

  /// The shape of a number: whether it had a fraction or an exponent.
  package struct NumberShape {
    package let range: Range<Int>
    package let isInteger: Bool
  }

  @inlinable
  package mutating func number() throws(Failure) -> NumberShape {
    let start = i
    if peek == UInt8(ascii: "-") { i += 1 }
    guard let first = peek, first >= 0x30 && first <= 0x39 else { throw fail("bad number") }
    i += 1
    if first == 0x30, let next = peek, next >= 0x30 && next <= 0x39 {
      throw fail("leading zero in number")
    }
    while let c = peek, c >= 0x30 && c <= 0x39 { i += 1 }
    var isInteger = true
    if peek == UInt8(ascii: ".") {
      isInteger = false
      i += 1
      guard let c = peek, c >= 0x30 && c <= 0x39 else { throw fail("bad fraction") }
      while let c = peek, c >= 0x30 && c <= 0x39 { i += 1 }
    }
    if peek == UInt8(ascii: "e") || peek == UInt8(ascii: "E") {
      isInteger = false
      i += 1
      if peek == UInt8(ascii: "+") || peek == UInt8(ascii: "-") { i += 1 }
      guard let c = peek, c >= 0x30 && c <= 0x39 else { throw fail("bad exponent") }
      while let c = peek, c >= 0x30 && c <= 0x39 { i += 1 }
    }
    return NumberShape(range: start..<i, isInteger: isInteger)
  }

  /// The string literal at byte `offset` of `bytes`, decoded; nil when
  /// none starts there.
  package static func string(in bytes: UnsafeRawBufferPointer, at offset: Int = 0) -> [UInt8]? {
    var scanner = JSONScanner(bytes)
    scanner.i = offset
    var out: [UInt8] = []
    guard (try? scanner.string(into: &out)) != nil else { return nil }
    return out
  }

  /// Checks a string literal without copying it anywhere (keys and values
  /// the parser skips).
  @inlinable
  package mutating func skipString() throws(Failure) {
    var unused: [UInt8] = []
    try string(into: &unused, keeping: false)
  }

  /// Decodes a string literal into UTF-8 bytes; with `keeping` false, only
  /// checks it. Returns whether it had an escape (its bytes then differ
  /// from the decoded ones).
  @inlinable @discardableResult
  package mutating func string(into out: inout [UInt8], keeping: Bool = true) throws(Failure)
    -> Bool
  {
    try expect(UInt8(ascii: "\""))
    var escaped = false
    while true {
      // Plain printable ASCII, the bulk of ids, is copied a run at a time,
      // and passed over eight bytes at a time up to the first special one.
      let run = i
      if let base = bytes.baseAddress {
        while i + 8 <= bytes.count {
          let special = Self.specialBytes(
            UInt64(littleEndian: base.loadUnaligned(fromByteOffset: i, as: UInt64.self)))
          if special != 0 {
            i += special.trailingZeroBitCount >> 3
            break
          }
          i += 8
        }
      }
      while i < bytes.count, bytes[i] >= 0x20, bytes[i] < 0x80, bytes[i] != UInt8(ascii: "\""),
        bytes[i] != UInt8(ascii: "\\")
      {
        i += 1
      }
      if keeping && i > run {
        out.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[run..<i]))
      }
      guard let c = peek else { throw fail("unterminated string") }
      switch c {
      case UInt8(ascii: "\""):
        i += 1
        return escaped
      case UInt8(ascii: "\\"):
        i += 1
        escaped = true
        guard let e = peek else { throw fail("unterminated escape") }
        i += 1
        let decoded: UInt8
        switch e {
        case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): decoded = e
        case UInt8(ascii: "b"): decoded = 0x08
        case UInt8(ascii: "f"): decoded = 0x0C
        case UInt8(ascii: "n"): decoded = 0x0A
        case UInt8(ascii: "r"): decoded = 0x0D
        case UInt8(ascii: "t"): decoded = 0x09
        case UInt8(ascii: "u"):
          var scalar = try hex4()
          if scalar >= 0xD800 && scalar < 0xDC00 {
            guard peek == UInt8(ascii: "\\"), i + 1 < bytes.count, bytes[i + 1] == UInt8(ascii: "u")
            else {
              throw fail("lone surrogate")
            }
            i += 2
            let low = try hex4()
            guard low >= 0xDC00 && low < 0xE000 else { throw fail("lone surrogate") }
            scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low - 0xDC00)
          } else if scalar >= 0xDC00 && scalar < 0xE000 {
            throw fail("lone surrogate")
          }
          if keeping { out.append(contentsOf: Unicode.UTF8.encode(Unicode.Scalar(scalar)!)!) }
          continue
        default: throw fail("bad escape")
        }
        if keeping { out.append(decoded) }
      case 0..<0x20:
        throw fail("control character in string")
      default:  // 0x80 and up: plain ASCII was taken by the run above
        try utf8Sequence(into: &out, keeping: keeping)
      }
    }
  }

  /// The high bit of each byte of `w` that is a quote, a backslash, a
  /// control character (below 0x20) or not ASCII. Bytes above the first
  /// such byte may be flagged wrongly (a borrow runs up), never below it,
  /// so the lowest flag is exact.
  @inlinable @inline(__always)
  package static func specialBytes(_ w: UInt64) -> UInt64 {
    let ones: UInt64 = 0x0101_0101_0101_0101
    let quotes = w ^ (ones &* 0x22)
    let backslashes = w ^ (ones &* 0x5C)
    let zeroQuote = (quotes &- ones) & ~quotes
    let zeroBackslash = (backslashes &- ones) & ~backslashes
    let control = (w &- ones &* 0x20) & ~w
    return (zeroQuote | zeroBackslash | control | w) & (ones &* 0x80)
  }

  @usableFromInline
  mutating func hex4() throws(Failure) -> UInt32 {
    guard i + 4 <= bytes.count else { throw fail("bad \\u escape") }
    var v: UInt32 = 0
    for _ in 0..<4 {
      let c = bytes[i]
      let d: UInt32
      switch c {
      case UInt8(ascii: "0")...UInt8(ascii: "9"): d = UInt32(c - 0x30)
      case UInt8(ascii: "a")...UInt8(ascii: "f"): d = UInt32(c - 0x61 + 10)
      case UInt8(ascii: "A")...UInt8(ascii: "F"): d = UInt32(c - 0x41 + 10)
      default: throw fail("bad \\u escape")
      }
      v = v << 4 | d
      i += 1
    }
    return v
  }

  /// Copies one well-formed multi-byte UTF-8 sequence.
  @usableFromInline
  mutating func utf8Sequence(into out: inout [UInt8], keeping: Bool) throws(Failure) {
    let c = bytes[i]
    let (length, minimum): (Int, UInt32) =
      switch c {
      case 0xC2...0xDF: (2, 0x80)
      case 0xE0...0xEF: (3, 0x800)
      case 0xF0...0xF4: (4, 0x10000)
      default: (0, 0)
      }
    guard length > 0, i + length <= bytes.count else { throw fail("invalid UTF-8") }
    var scalar = UInt32(c) & (0xFF >> (length + 1))
    for k in 1..<length {
      let cont = bytes[i + k]
      guard cont & 0xC0 == 0x80 else { throw fail("invalid UTF-8") }
      scalar = scalar << 6 | UInt32(cont & 0x3F)
    }
    guard scalar >= minimum, scalar <= 0x10FFFF, !(0xD800..<0xE000).contains(scalar) else {
      throw fail("invalid UTF-8")
    }
    if keeping { out.append(contentsOf: UnsafeRawBufferPointer(rebasing: bytes[i..<(i + length)])) }
    i += length
  }
}

/// Where a whole JSON document breaks RFC 8259, for error messages about
/// files that are not traffic (`fanout prefs apply`'s changes).
package enum JSONDocument {
  /// The first syntax error, as "line L, column C: reason"; nil if `bytes`
  /// hold exactly one valid JSON value (with surrounding whitespace).
  package static func firstError(in bytes: [UInt8]) -> String? {
    bytes.withUnsafeBytes { raw -> String? in
      var scanner = JSONScanner(raw)
      do throws(JSONScanner.Failure) {
        scanner.skipWhitespace()
        try scanner.value(depth: 0)
        scanner.skipWhitespace()
        if scanner.i < raw.count { throw scanner.fail("unexpected text after the value") }
        return nil
      } catch {
        let before = raw[..<min(scanner.i, raw.count)]
        let line = before.reduce(1) { $0 + ($1 == 0x0A ? 1 : 0) }
        let column = scanner.i - (before.lastIndex(of: 0x0A).map { $0 + 1 } ?? 0) + 1
        let suffix = " at byte \(scanner.i + 1)"
        let reason =
          error.reason.hasSuffix(suffix)
          ? String(error.reason.dropLast(suffix.count)) : error.reason
        return "line \(line), column \(column): \(reason)"
      }
    }
  }
}
