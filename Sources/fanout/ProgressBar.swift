import FanoutPipeline

#if canImport(Glibc)
  import Glibc
#endif

/// A one-line progress bar on standard error — how much of the work is
/// done, how many items (messages, or what `unit` names), their rate and an
/// estimate of the time left — shown once a run has taken a second (short
/// runs stay quiet).
final class ProgressBar: @unchecked Sendable {
  private let started = ContinuousClock.now
  private var shown = false
  private let unit: String

  init(unit: String = "messages") { self.unit = unit }

  func update(messages: Int, fraction: Double?) {
    guard ContinuousClock.now - started > .seconds(1) else { return }
    shown = true
    var line = "\r"
    if let fraction {
      let filled = Int(fraction * 30)
      line +=
        "[" + String(repeating: "#", count: filled) + String(repeating: "-", count: 30 - filled)
      line += "] \(Int(fraction * 100))%  "
    }
    let elapsed = (ContinuousClock.now - started).seconds
    line += "\(messages) \(unit), \(Int(Double(messages) / max(elapsed, 1e-9))) \(unit)/s"
    if let fraction, fraction > 0.01, fraction < 1 {
      line += ", about \(Int((elapsed * (1 - fraction) / fraction).rounded())) s to go  "
    }
    var stderr = StandardError()
    print(line, terminator: "", to: &stderr)
  }

  /// A step without a count (loading, checking), named as it starts; drawn
  /// at once, since nothing redraws it while it runs.
  func show(step: String) {
    shown = true
    var stderr = StandardError()
    print("\r\u{1B}[K\(step)…", terminator: "", to: &stderr)
  }

  func clear() {
    guard shown else { return }
    shown = false
    var stderr = StandardError()
    print("\r\u{1B}[K", terminator: "", to: &stderr)
  }
}

extension ProgressBar {
  /// A bar for a long command: drawn only when standard error is a terminal.
  static func ifTerminal(unit: String = "messages") -> ProgressBar? {
    isatty(2) != 0 ? ProgressBar(unit: unit) : nil
  }
}
