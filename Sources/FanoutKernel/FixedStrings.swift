/// Strings fixed for the life of the process (JSON fragments the loops
/// copy into output), as raw bytes in one allocation that is never freed.
///
/// A `static let` of `[[UInt8]]` costs a retain and a release of the
/// shared element per copy, and with two workers copying the same
/// fragments those reference counts bounce between the cores' caches.
/// These views touch no reference count.
public struct FixedStrings: @unchecked Sendable {
  private let bytes: UnsafeBufferPointer<UInt8>
  private let offsets: UnsafeBufferPointer<Int>

  public init(_ strings: [[UInt8]]) {
    let bytes = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: max(1, strings.joined().count))
    let offsets = UnsafeMutableBufferPointer<Int>.allocate(capacity: strings.count + 1)
    var end = 0
    offsets[0] = 0
    for (i, string) in strings.enumerated() {
      _ = UnsafeMutableBufferPointer(rebasing: bytes[end...]).initialize(from: string)
      end += string.count
      offsets[i + 1] = end
    }
    self.bytes = UnsafeBufferPointer(bytes)
    self.offsets = UnsafeBufferPointer(offsets)
  }

  public init<S: Sequence<String>>(_ strings: S) { self.init(strings.map { Array($0.utf8) }) }

  @inline(__always)
  public subscript(i: Int) -> UnsafeBufferPointer<UInt8> {
    UnsafeBufferPointer(rebasing: bytes[offsets[i]..<offsets[i &+ 1]])
  }
}
