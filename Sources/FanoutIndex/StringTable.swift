/// Byte strings stored end to end, addressed by dense `Int32` ids.
///
/// Used for ids and for pre-escaped JSON fragments, so that output is a byte
/// copy. `offsets` has one more element than there are strings.
public struct BytePool: Sendable {
  public private(set) var bytes: [UInt8] = []
  public private(set) var offsets: [Int] = [0]

  public init() {}

  public var count: Int { offsets.count - 1 }

  public mutating func append<S: Sequence>(_ s: S) where S.Element == UInt8 {
    bytes.append(contentsOf: s)
    offsets.append(bytes.count)
  }

  public subscript(i: Int) -> ArraySlice<UInt8> { bytes[offsets[i]..<offsets[i + 1]] }

  public func string(_ i: Int) -> String { String(decoding: self[i], as: UTF8.self) }
}

/// An interned set of strings: dense ids in insertion order, and a lookup
/// from raw bytes to id that hashes the bytes without making a `String`.
public struct StringTable: Sendable {
  public private(set) var pool = BytePool()
  private var slots: [Int32] = Array(repeating: -1, count: 16)

  public init() {}

  public var count: Int { pool.count }
  public subscript(i: Int) -> String { pool.string(i) }

  /// Adds `s` and returns its id, or returns nil if it is already present.
  public mutating func insert(_ s: String) -> Int32? {
    var s = s
    return s.withUTF8 { insert(UnsafeRawBufferPointer($0)) }
  }

  public mutating func insert(_ key: UnsafeRawBufferPointer) -> Int32? {
    if find(key) != nil { return nil }
    if (count + 1) * 2 > slots.count { grow() }
    let id = Int32(count)
    pool.append(key)
    place(id, hash: Self.hash(key))
    return id
  }

  public func find(_ s: String) -> Int32? {
    var s = s
    return s.withUTF8 { find(UnsafeRawBufferPointer($0)) }
  }

  /// The id of `key`, if present.
  ///
  /// - Complexity: O(key length) expected; does not allocate.
  public func find(_ key: UnsafeRawBufferPointer) -> Int32? {
    let mask = slots.count - 1
    var i = Int(truncatingIfNeeded: Self.hash(key)) & mask
    return pool.bytes.withUnsafeBufferPointer { bytes in
      while true {
        let id = slots[i]
        if id < 0 { return nil }
        let lo = pool.offsets[Int(id)]
        let hi = pool.offsets[Int(id) + 1]
        if hi - lo == key.count && (key.isEmpty || memcmpEqual(bytes.baseAddress! + lo, key)) { return id }
        i = (i + 1) & mask
      }
    }
  }

  private func memcmpEqual(_ a: UnsafePointer<UInt8>, _ key: UnsafeRawBufferPointer) -> Bool {
    for j in 0..<key.count where a[j] != key[j] { return false }
    return true
  }

  private mutating func place(_ id: Int32, hash: UInt64) {
    let mask = slots.count - 1
    var i = Int(truncatingIfNeeded: hash) & mask
    while slots[i] >= 0 { i = (i + 1) & mask }
    slots[i] = id
  }

  private mutating func grow() {
    slots = Array(repeating: -1, count: slots.count * 2)
    for id in 0..<count {
      let h = pool.bytes.withUnsafeBytes { raw in
        Self.hash(UnsafeRawBufferPointer(rebasing: raw[pool.offsets[id]..<pool.offsets[id + 1]]))
      }
      place(Int32(id), hash: h)
    }
  }

  /// FNV-1a: fixed, so lookups cost the same in every process.
  static func hash(_ key: UnsafeRawBufferPointer) -> UInt64 {
    var h: UInt64 = 0xcbf2_9ce4_8422_2325
    for b in key { h = (h ^ UInt64(b)) &* 0x100_0000_01b3 }
    return h ^ (h >> 29)
  }
}

/// JSON string escaping for the fragments the index pre-builds.
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
}
