import FanoutModel

#if canImport(Glibc)
  import Glibc
#endif

/// The wall-clock and CPU time a phase of a run took, summed over its
/// stretches: their ratio is how many cores the phase kept busy.
public struct PhaseTime: Sendable {
  public var seconds = 0.0
  /// CPU seconds of every thread of the process meanwhile (a thread that
  /// works on behind the phase, as the output thread writes, counts too).
  public var cpuSeconds = 0.0

  public init() {}

  /// Cores busy on average over the phase (0 for a phase that took no time).
  public var cores: Double { seconds > 0 ? cpuSeconds / seconds : 0 }

  /// Where a stretch of the phase began.
  public struct Start: Sendable {
    let wall: ContinuousClock.Instant
    let cpu: Double
  }

  public static func start() -> Start { Start(wall: .now, cpu: processCPUSeconds()) }

  /// Adds the stretch from `start` to now.
  public mutating func add(since start: Start) {
    seconds += (ContinuousClock.now - start.wall).seconds
    cpuSeconds += Self.processCPUSeconds() - start.cpu
  }

  public static func += (total: inout PhaseTime, other: PhaseTime) {
    total.seconds += other.seconds
    total.cpuSeconds += other.cpuSeconds
  }

  /// Every thread's CPU time so far, to the nanosecond (`getrusage` counts
  /// in clock ticks on some kernels: too coarse for a phase's stretches).
  static func processCPUSeconds() -> Double {
    var now = timespec()
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now)
    return Double(now.tv_sec) + Double(now.tv_nsec) / 1e9
  }
}
