import Dispatch
import FanoutOutput
import FanoutTraffic

/// Writes a run's output on one serial queue while the workers evaluate the
/// next group of chunks. At most one batch waits to be written, which bounds
/// memory; the order of submission is the order of the bytes.
///
/// `@unchecked Sendable`: `writer` and `failure` are touched only on `queue`
/// while the run is under way, and by the caller only after `finish()`.
final class BackgroundWriter: @unchecked Sendable {
  private let writer: RunWriter
  private let queue = DispatchQueue(label: "fanout.output")
  private let inFlight = DispatchSemaphore(value: 1)
  private var failure: OutputError?

  init(_ writer: RunWriter) { self.writer = writer }

  /// Queues a write; blocks while the previous batch is still being written.
  func submit(_ write: @escaping @Sendable (RunWriter) throws(OutputError) -> Void) {
    inFlight.wait()
    queue.async {
      if self.failure == nil {
        do throws(OutputError) { try write(self.writer) } catch { self.failure = error }
      }
      self.inFlight.signal()
    }
  }

  /// Waits for every queued write; returns the writer, or the first failure.
  func finish() throws(OutputError) -> RunWriter {
    queue.sync {}
    if let failure { throw failure }
    return writer
  }
}
