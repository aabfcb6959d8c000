import FanoutModel
import FanoutPipeline

#if canImport(Glibc)
  import Glibc
#endif

/// One progress line on standard error: the phase (load, evaluate, write;
/// gen's and split's steps), how much of the work is done, how many items
/// (messages, or what `unit` names), their rate and the time left. Counts
/// start from a phase's beginning; the line never grows past the terminal's
/// width (it is cut, never wrapped: a wrapped line cannot be redrawn in
/// place), and is shown once a run has taken a second (short runs stay quiet).
final class ProgressBar: @unchecked Sendable {
  private let started = ContinuousClock.now
  private var phaseStarted = ContinuousClock.now
  private var shown = false
  private let unit: String
  private var phase = ""

  init(unit: String = "messages") { self.unit = unit }

  /// The terminal's width in columns (the ioctl, else COLUMNS, else 80).
  static func columns() -> Int {
    var size = winsize()
    if ioctl(2, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 { return Int(size.ws_col) }
    if let text = getenv("COLUMNS").map({ String(cString: $0) }), let n = Int(text), n > 0 {
      return n
    }
    return 80
  }

  /// A new phase: named on the line at once (nothing may redraw it for a while).
  func show(step: String) {
    phase = step
    phaseStarted = ContinuousClock.now
    draw(step + "…")
  }

  func update(messages: Int, fraction: Double?) {
    guard ContinuousClock.now - started > .seconds(1) else { return }
    let elapsed = (ContinuousClock.now - phaseStarted).seconds
    var line = phase.isEmpty ? "" : phase + " "
    if let fraction {
      let done = min(max(fraction, 0), 1)
      let filled = Int(done * 20)
      line += "[" + String(repeating: "#", count: filled)
      line += String(repeating: "-", count: 20 - filled) + "] \(Int(done * 100))% "
    }
    line += "\(messages) \(unit), \(Int(Double(messages) / max(elapsed, 1e-9))) \(unit)/s"
    if let fraction, fraction > 0.01, fraction < 1 {
      line += ", \(Int((elapsed * (1 - fraction) / fraction).rounded())) s left"
    }
    draw(line)
  }

  /// Draws `text` in place of the line, cut to the terminal's width less
  /// one column (a line that fills the last column wraps on some terminals).
  private func draw(_ text: String) {
    shown = true
    let fitted = String(text.unicodeScalars.prefix(max(1, Self.columns() - 1)))
    StandardError.writeRaw("\r" + Printable.text(fitted, keepingLines: false) + "\u{1B}[K")
  }

  func clear() {
    guard shown else { return }
    shown = false
    StandardError.writeRaw("\r\u{1B}[K")
  }
}

extension ProgressBar {
  /// A bar for a long command: drawn only when standard error is a terminal.
  static func ifTerminal(unit: String = "messages") -> ProgressBar? {
    isatty(2) != 0 ? ProgressBar(unit: unit) : nil
  }
}
