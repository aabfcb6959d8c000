import FanoutTime

#if canImport(Glibc)
  import Glibc
#endif

/// Log lines on standard error, `fanout stream: …`, each in one write so
/// lines from different threads never interleave.
struct StreamLog: Sendable {
  func line(_ text: String) {
    var bytes = Array("fanout stream: \(text)\n".utf8)
    _ = bytes.withUnsafeMutableBytes { write(STDERR_FILENO, $0.baseAddress, $0.count) }
  }
}

/// Wall-clock time, for the records (not for measuring: that is ContinuousClock).
enum WallClock {
  /// Milliseconds since the Unix epoch.
  static func nowMillis() -> Int64 {
    var now = timespec()
    clock_gettime(CLOCK_REALTIME, &now)
    return Int64(now.tv_sec) * 1000 + Int64(now.tv_nsec) / 1_000_000
  }
}
