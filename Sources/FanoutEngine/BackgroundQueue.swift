import Dispatch
import Synchronization

/// Work on some state, handed to one serial queue while the caller goes on
/// (the workers evaluate the next group of chunks while `eval` writes the
/// last one, or `audit` matches it with the log). At most `inFlight` pieces
/// of work wait, which bounds memory; the order of submission is the order
/// of the work. After a failure the rest is skipped, and `finish` throws it.
///
/// `@unchecked Sendable`: `state` and `failure` are touched only on `queue`
/// while the run is under way, and by the caller only after `finish()`.
package final class BackgroundQueue<State, Failure: Error>: @unchecked Sendable {
  private var state: State
  private let queue: DispatchQueue
  private let slots: DispatchSemaphore
  private var failure: Failure?
  private let failed = Atomic<Bool>(false)

  package init(_ state: State, label: String, inFlight: Int = 1) {
    self.state = state
    queue = DispatchQueue(label: label)
    slots = DispatchSemaphore(value: inFlight)
  }

  /// Queues `work`; blocks while `inFlight` pieces are still waiting.
  package func submit(_ work: @escaping @Sendable (inout State) throws(Failure) -> Void) {
    slots.wait()
    queue.async {
      if self.failure == nil {
        do throws(Failure) { try work(&self.state) } catch {
          self.failure = error
          self.failed.store(true, ordering: .releasing)
        }
      }
      self.slots.signal()
    }
  }

  /// Whether a piece of work has failed (the caller may stop early).
  package var hasFailed: Bool { failed.load(ordering: .acquiring) }

  /// Waits for every queued piece; returns the state, or the first failure.
  package func finish() throws(Failure) -> State {
    queue.sync {}
    if let failure { throw failure }
    return state
  }
}
