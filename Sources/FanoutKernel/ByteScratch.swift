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
  private var base: UnsafeMutablePointer<UInt8>
  private var capacity: Int
  private(set) var count = 0

  public init(capacity: Int = 256) {
    self.capacity = capacity
    base = .allocate(capacity: capacity)
  }

  /// The bytes appended since the last `removeAll`.
  public var bytes: UnsafeBufferPointer<UInt8> { UnsafeBufferPointer(start: base, count: count) }

  @inline(__always)
  public mutating func removeAll() { count = 0 }

  @inline(__always)
  public mutating func append(_ byte: UInt8) {
    reserve(1)
    base[count] = byte
    count &+= 1
  }

  @inline(__always)
  public mutating func append(contentsOf bytes: UnsafeBufferPointer<UInt8>) {
    guard let source = bytes.baseAddress else { return }
    reserve(bytes.count)
    (base + count).update(from: source, count: bytes.count)
    count &+= bytes.count
  }

  /// `value` in decimal, as `JSONText.appendDecimal` writes it, straight
  /// into the buffer.
  @inline(__always)
  public mutating func appendDecimal(_ value: Int64) {
    reserve(JSONText.decimalWidth)
    count &+= JSONText.writeDecimal(value, to: base + count)
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

/// A `ByteScratch` kept from call to call by a value that cannot free it
/// itself (a worker struct): taken out (`scratch`), used, and put back.
public final class ByteScratchBox {
  public var scratch: ByteScratch

  public init(capacity: Int) { scratch = ByteScratch(capacity: capacity) }

  deinit { scratch.deallocate() }
}
