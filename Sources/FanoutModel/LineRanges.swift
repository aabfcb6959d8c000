#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

extension Array where Element == UInt8 {
  /// Calls `body` with where each line lies, its newline excluded, for
  /// bytes made of whole lines (each ends with a newline; bytes after the
  /// last newline are not a line). Line ends are found with `memchr`: a
  /// generic search looks at the bytes one by one (a stream batch's output
  /// is scanned per line for each sink).
  @inlinable
  public func forEachLine(_ body: (Range<Int>) -> Void) {
    withUnsafeBytes { raw in
      guard let base = raw.baseAddress else { return }
      var start = 0
      while start < raw.count, let hit = memchr(base + start, 0x0A, raw.count - start) {
        let end = base.distance(to: UnsafeRawPointer(hit))
        body(start..<end)
        start = end + 1
      }
    }
  }
}
