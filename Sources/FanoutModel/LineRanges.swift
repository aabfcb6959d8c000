#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// The longest line a file is read with (traffic, sent logs, shard
/// files): 256 MiB, room for a message mentioning twenty million users.
/// A longer one is refused as it is read, not held: input without line
/// ends (a broken producer, `/dev/zero`, a small LZ4 frame that
/// decompresses to gigabytes) cannot exhaust memory.
public let maxFileLineBytes = 256 << 20

extension Array where Element == UInt8 {
  /// Where the first newline at or after `start` is, if any. Found with
  /// `memchr`: a generic search looks at the bytes one by one.
  @inlinable
  public func newline(from start: Int) -> Int? {
    withUnsafeBytes { raw in
      guard let base = raw.baseAddress, start < raw.count,
        let hit = memchr(base + start, 0x0A, raw.count - start)
      else { return nil }
      return base.distance(to: UnsafeRawPointer(hit))
    }
  }

  /// Calls `body` with where each line lies, its newline excluded, for
  /// bytes made of whole lines (each ends with a newline; bytes after the
  /// last newline are not a line): a stream batch's output, scanned per
  /// line by each sink.
  @inlinable
  public func forEachLine(_ body: (Range<Int>) -> Void) {
    var start = 0
    while let end = newline(from: start) {
      body(start..<end)
      start = end + 1
    }
  }
}
