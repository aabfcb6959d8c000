import FanoutModel

/// Where the evaluator's JSON fragments are appended: an output array, or
/// a `ByteScratch` a pair's fields are made in once for all its entries.
protocol ByteOutput {
  mutating func append(_ byte: UInt8)
  mutating func append(contentsOf bytes: UnsafeBufferPointer<UInt8>)
  mutating func appendDecimal(_ value: Int64)
}

extension Array: ByteOutput where Element == UInt8 {
  @inline(__always)
  mutating func appendDecimal(_ value: Int64) { JSONText.appendDecimal(value, to: &self) }
}

/// A byte buffer reused from pair to pair (the recipient entries' common
/// tail): its appends check only the capacity, where an array's also
/// check that its storage is unique and retain it when it is copied out.
/// Owned by one evaluator; freed with it (`deallocate`).
struct ByteScratch: ByteOutput {
  private var base: UnsafeMutablePointer<UInt8>
  private var capacity: Int
  private(set) var count = 0

  init(capacity: Int = 256) {
    self.capacity = capacity
    base = .allocate(capacity: capacity)
  }

  /// The bytes appended since the last `removeAll`.
  var bytes: UnsafeBufferPointer<UInt8> { UnsafeBufferPointer(start: base, count: count) }

  @inline(__always)
  mutating func removeAll() { count = 0 }

  @inline(__always)
  mutating func append(_ byte: UInt8) {
    reserve(1)
    base[count] = byte
    count &+= 1
  }

  @inline(__always)
  mutating func append(contentsOf bytes: UnsafeBufferPointer<UInt8>) {
    guard let source = bytes.baseAddress else { return }
    let n = bytes.count
    reserve(n)
    if n >= 8 && n <= 16 {
      // JSON keys: two overlapping 8-byte moves, not a call to memmove.
      let from = UnsafeRawPointer(source)
      let to = UnsafeMutableRawPointer(base + count)
      to.storeBytes(of: from.loadUnaligned(as: UInt64.self), as: UInt64.self)
      to.storeBytes(
        of: from.loadUnaligned(fromByteOffset: n &- 8, as: UInt64.self),
        toByteOffset: n &- 8, as: UInt64.self)
    } else {
      (base + count).update(from: source, count: n)
    }
    count &+= n
  }

  /// `value` in decimal, as `JSONText.appendDecimal` writes it, straight
  /// into the buffer.
  @inline(__always)
  mutating func appendDecimal(_ value: Int64) {
    reserve(20)
    // Ids and badges are mostly one or two digits.
    if value >= 0 && value < 100 {
      let v = UInt8(truncatingIfNeeded: value)
      if v < 10 {
        base[count] = UInt8(ascii: "0") &+ v
        count &+= 1
      } else {
        base[count] = UInt8(ascii: "0") &+ v / 10
        base[count &+ 1] = UInt8(ascii: "0") &+ v % 10
        count &+= 2
      }
      return
    }
    if value < 0 {
      base[count] = UInt8(ascii: "-")
      count &+= 1
    }
    var rest = value.magnitude
    var digits = 1
    var scan = rest
    while scan >= 10 {
      scan /= 10
      digits &+= 1
    }
    count &+= digits
    var at = count
    repeat {
      at &-= 1
      base[at] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: rest % 10)
      rest /= 10
    } while rest > 0
  }

  @inline(__always)
  private mutating func reserve(_ n: Int) {
    if count &+ n > capacity { grow(to: count &+ n) }
  }

  @inline(never)
  private mutating func grow(to needed: Int) {
    var size = capacity &* 2
    while size < needed { size &*= 2 }
    let larger = UnsafeMutablePointer<UInt8>.allocate(capacity: size)
    larger.initialize(from: base, count: count)
    base.deallocate()
    (base, capacity) = (larger, size)
  }

  /// Frees the buffer; the scratch must not be used again.
  func deallocate() { base.deallocate() }
}
