/// JSON text built as bytes: string literals (escaped once, when an index or
/// a line is built) and decimal numbers, so that output lines are byte copies.
public enum JSONText {
  /// `s` as a JSON string literal, quotes included: `"`, `\` and control
  /// characters are escaped, everything else is copied as UTF-8.
  public static func quoted<S: Sequence>(_ s: S) -> [UInt8] where S.Element == UInt8 {
    var out: [UInt8] = [UInt8(ascii: "\"")]
    for c in s {
      switch c {
      case UInt8(ascii: "\""): out += [UInt8(ascii: "\\"), UInt8(ascii: "\"")]
      case UInt8(ascii: "\\"): out += [UInt8(ascii: "\\"), UInt8(ascii: "\\")]
      case 0x0A: out += Array(#"\n"#.utf8)
      case 0x0D: out += Array(#"\r"#.utf8)
      case 0x09: out += Array(#"\t"#.utf8)
      case 0x08: out += Array(#"\b"#.utf8)
      case 0x0C: out += Array(#"\f"#.utf8)
      case 0..<0x20:
        let hex = Array("0123456789abcdef".utf8)
        out += Array(#"\u00"#.utf8) + [hex[Int(c >> 4)], hex[Int(c & 15)]]
      default: out.append(c)
      }
    }
    out.append(UInt8(ascii: "\""))
    return out
  }

  public static func quoted(_ s: String) -> [UInt8] { quoted(s.utf8) }

  /// Appends `value` in decimal, as JSON writes an integer; builds no String.
  public static func appendDecimal(_ value: Int64, to out: inout [UInt8]) {
    withUnsafeTemporaryAllocation(of: UInt8.self, capacity: decimalWidth) { digits in
      let count = writeDecimal(value, to: digits.baseAddress!)
      out.append(contentsOf: UnsafeBufferPointer(rebasing: digits[..<count]))
    }
  }

  /// The most bytes `writeDecimal` writes (`Int64.min`).
  @inlinable public static var decimalWidth: Int { 20 }

  /// Writes `value` in decimal at `out` (room for `decimalWidth` bytes);
  /// returns how many bytes it wrote.
  @inlinable
  public static func writeDecimal(_ value: Int64, to out: UnsafeMutablePointer<UInt8>) -> Int {
    // Ids, counts and badges are mostly one or two digits.
    if value >= 0 && value < 100 {
      let v = UInt8(truncatingIfNeeded: value)
      if v < 10 {
        out[0] = UInt8(ascii: "0") &+ v
        return 1
      }
      out[0] = UInt8(ascii: "0") &+ v / 10
      out[1] = UInt8(ascii: "0") &+ v % 10
      return 2
    }
    var count = 0
    if value < 0 {
      out[0] = UInt8(ascii: "-")
      count = 1
    }
    var rest = value.magnitude
    // Digits: one more per power of ten at most `rest` (19 fit in a UInt64).
    var digits = 1
    var power: UInt64 = 10
    while digits < 20 && rest >= power {
      digits &+= 1
      power = power &* 10
    }
    count &+= digits
    var at = count
    repeat {
      at &-= 1
      out[at] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: rest % 10)
      rest /= 10
    } while rest > 0
    return count
  }

  /// Appends `s` quoted to `out`; copies runs that need no escape in one go.
  @inlinable
  public static func appendQuoted<Out: JSONByteSink>(
    _ s: UnsafeRawBufferPointer, to out: inout Out
  ) {
    out.append(UInt8(ascii: "\""))
    var run = 0
    for i in 0..<s.count {
      let c = s[i]
      guard c < 0x20 || c == UInt8(ascii: "\"") || c == UInt8(ascii: "\\") else { continue }
      out.append(contentsOf: UnsafeRawBufferPointer(rebasing: s[run..<i]))
      quoted(CollectionOfOne(c)).withUnsafeBytes {
        out.append(contentsOf: UnsafeRawBufferPointer(rebasing: $0.dropFirst().dropLast()))
      }
      run = i + 1
    }
    out.append(contentsOf: UnsafeRawBufferPointer(rebasing: s[run..<s.count]))
    out.append(UInt8(ascii: "\""))
  }
}

/// Where JSON text is appended: a byte array, or a column of bytes.
public protocol JSONByteSink {
  mutating func append(_ byte: UInt8)
  mutating func append(contentsOf bytes: UnsafeRawBufferPointer)
}

extension Array: JSONByteSink where Element == UInt8 {}
