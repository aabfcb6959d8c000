#if canImport(Glibc)
  import Glibc
#endif

/// Wall-clock time, for records and defaults (not for measuring: that is ContinuousClock).
public enum WallClock {
  /// Milliseconds since the Unix epoch.
  public static func nowMillis() -> Int64 {
    var now = timespec()
    clock_gettime(CLOCK_REALTIME, &now)
    return Int64(now.tv_sec) * 1000 + Int64(now.tv_nsec) / 1_000_000
  }
}
