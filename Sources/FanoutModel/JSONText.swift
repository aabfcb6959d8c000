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
    if value < 0 { out.append(UInt8(ascii: "-")) }
    var rest = value.magnitude
    withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { digits in
      var first = digits.count
      repeat {
        first -= 1
        digits[first] = UInt8(ascii: "0") &+ UInt8(rest % 10)
        rest /= 10
      } while rest > 0
      out.append(contentsOf: UnsafeBufferPointer(rebasing: digits[first...]))
    }
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
