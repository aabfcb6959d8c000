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
/// Owned by one evaluator and freed with it (`deallocate`), or held by a
/// `ByteScratchBox`.
public struct ByteScratch: ByteOutput {
  // (Inlinable, as the modules that append to it are others: a call per
  // append, and memmove's per fragment, were a third of a sweep's change
  // lines' time.)
  @usableFromInline var base: UnsafeMutablePointer<UInt8>
  @usableFromInline var capacity: Int
  @usableFromInline private(set) var count = 0

  public init(capacity: Int = 256) {
    self.capacity = capacity
    base = .allocate(capacity: capacity)
  }

  /// The bytes appended since the last `removeAll`.
  @inlinable
  public var bytes: UnsafeBufferPointer<UInt8> { UnsafeBufferPointer(start: base, count: count) }

  @inlinable @inline(__always)
  public mutating func removeAll() { count = 0 }

  @inlinable @inline(__always)
  public mutating func append(_ byte: UInt8) {
    reserve(1)
    base[count] = byte
    count &+= 1
  }

  @inlinable @inline(__always)
  public mutating func append(contentsOf bytes: UnsafeBufferPointer<UInt8>) {
    guard let source = bytes.baseAddress else { return }
    let n = bytes.count
    reserve(n)
    Self.copy(UnsafeRawPointer(source), to: UnsafeMutableRawPointer(base + count), n)
    count &+= n
  }

  /// Copies `n` bytes; the JSON fragments are mostly 2 to 16 bytes long,
  /// copied as two words that may overlap rather than by a call.
  @inlinable @inline(__always)
  static func copy(_ from: UnsafeRawPointer, to: UnsafeMutableRawPointer, _ n: Int) {
    if n >= 8 && n <= 16 {
      let (head, tail) = (
        from.loadUnaligned(as: UInt64.self),
        from.loadUnaligned(fromByteOffset: n &- 8, as: UInt64.self)
      )
      to.storeBytes(of: head, as: UInt64.self)
      to.storeBytes(of: tail, toByteOffset: n &- 8, as: UInt64.self)
    } else if n >= 4 && n < 8 {
      let (head, tail) = (
        from.loadUnaligned(as: UInt32.self),
        from.loadUnaligned(fromByteOffset: n &- 4, as: UInt32.self)
      )
      to.storeBytes(of: head, as: UInt32.self)
      to.storeBytes(of: tail, toByteOffset: n &- 4, as: UInt32.self)
    } else {
      to.copyMemory(from: from, byteCount: n)
    }
  }

  /// `value` in decimal, as `JSONText.appendDecimal` writes it, straight
  /// into the buffer.
  @inline(__always)
  public mutating func appendDecimal(_ value: Int64) {
    reserve(JSONText.decimalWidth)
    count &+= JSONText.writeDecimal(value, to: base + count)
  }

  @inlinable @inline(__always)
  mutating func reserve(_ n: Int) {
    if count &+ n > capacity { grow(to: count &+ n) }
  }

  @usableFromInline @inline(never)
  mutating func grow(to needed: Int) {
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

/// A `ByteScratch` kept from call to call by a value that cannot free it
/// itself (a worker struct): taken out (`scratch`), used, and put back.
public final class ByteScratchBox {
  public var scratch: ByteScratch

  public init(capacity: Int) { scratch = ByteScratch(capacity: capacity) }

  deinit { scratch.deallocate() }
}
