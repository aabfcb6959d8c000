import FanoutIndex

/// Strings fixed for the life of the process (JSON fragments the loops
/// copy into output), as a `BytePool.View` over copies that are never freed, so
/// the view is always valid. Copying one touches no reference count, where
/// an element of a static `[[UInt8]]` is retained and released per copy.
public struct FixedStrings: @unchecked Sendable {
  private let view: BytePool.View

  public init(_ strings: [String]) {
    var pool = BytePool()
    for string in strings { pool.append(Array(string.utf8)) }
    let bytes = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: max(1, pool.bytes.count))
    _ = bytes.initialize(from: pool.bytes)
    let offsets = UnsafeMutableBufferPointer<Int>.allocate(capacity: pool.offsets.count)
    _ = offsets.initialize(from: pool.offsets)
    view = BytePool.View(
      bytes: UnsafeBufferPointer(bytes), offsets: UnsafeBufferPointer(offsets))
  }

  @inline(__always)
  public subscript(i: Int) -> UnsafeBufferPointer<UInt8> { view[i] }
}
