/// Well-formed UTF-8 (RFC 3629): no overlong forms, no surrogates, nothing
/// past U+10FFFF. Snapshot text is checked once, at load, so that every id
/// copied into JSON output is valid JSON text.
enum UTF8Check {
  /// - Complexity: O(n); ASCII is checked eight bytes at a time. No allocation.
  static func isValid(_ bytes: UnsafeRawBufferPointer) -> Bool {
    if isASCII(bytes) { return true }
    let n = bytes.count
    var i = 0
    while i + 8 <= n {
      if bytes.loadUnaligned(fromByteOffset: i, as: UInt64.self) & 0x8080_8080_8080_8080 != 0 {
        break
      }
      i += 8
    }
    while i < n {
      let c = bytes[i]
      if c < 0x80 {
        i += 1
        continue
      }
      // The second byte's range depends on the first; the rest are 80...BF.
      let (length, low, high): (Int, UInt8, UInt8) =
        switch c {
        case 0xC2...0xDF: (2, 0x80, 0xBF)
        case 0xE0: (3, 0xA0, 0xBF)
        case 0xE1...0xEC, 0xEE...0xEF: (3, 0x80, 0xBF)
        case 0xED: (3, 0x80, 0x9F)  // no surrogates
        case 0xF0: (4, 0x90, 0xBF)
        case 0xF1...0xF3: (4, 0x80, 0xBF)
        case 0xF4: (4, 0x80, 0x8F)  // nothing past U+10FFFF
        default: (0, 0, 0)
        }
      guard length > 0, i + length <= n, (low...high).contains(bytes[i + 1]) else { return false }
      for k in 2..<length where bytes[i + k] & 0xC0 != 0x80 { return false }
      i += length
    }
    return true
  }

  /// Whether every byte is below 0x80, read in words: ids are ASCII nearly
  /// always, and mostly a few bytes long, so the last word overlaps the one
  /// before rather than ending in a loop over single bytes.
  @inline(__always)
  static func isASCII(_ bytes: UnsafeRawBufferPointer) -> Bool {
    let n = bytes.count
    if n >= 8 {
      var seen = bytes.loadUnaligned(fromByteOffset: n - 8, as: UInt64.self)
      var i = 0
      while i + 8 <= n {
        seen |= bytes.loadUnaligned(fromByteOffset: i, as: UInt64.self)
        i += 8
      }
      return seen & 0x8080_8080_8080_8080 == 0
    }
    if n >= 4 {
      let seen =
        bytes.loadUnaligned(as: UInt32.self)
        | bytes.loadUnaligned(fromByteOffset: n - 4, as: UInt32.self)
      return seen & 0x8080_8080 == 0
    }
    var seen: UInt8 = 0
    for byte in bytes { seen |= byte }
    return seen & 0x80 == 0
  }
}
