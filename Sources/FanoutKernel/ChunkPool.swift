import Dispatch
import Synchronization

/// Workers write disjoint slots (slot i belongs to chunk i, state w to worker
/// w), so sharing the base is safe.
private struct DisjointSlots<T>: @unchecked Sendable {
  let base: UnsafeMutableBufferPointer<T>
  func store(_ value: consuming T, at i: Int) { base[i] = value }
  func update<X>(_ i: Int, _ body: (inout T) -> X) -> X { body(&base[i]) }
}

/// Runs `work` for chunks `0..<count` on up to `workers` threads and returns
/// the results in chunk order. Which thread runs which chunk varies; what a
/// chunk computes must depend only on its number.
public func runChunks<R>(count: Int, workers: Int, empty: R, _ work: @Sendable (Int) -> R) -> [R] {
  var states = [Void](repeating: (), count: max(1, workers))
  return runChunks(count: count, workers: &states, empty: empty) { _, c in work(c) }
}

/// `runChunks` with per-thread state: one worker thread per element of
/// `states`, each passing its own element to every chunk it runs. The caller
/// keeps the states between calls (`Evaluator`s, so that scratch space and
/// channel shares carry from chunk to chunk and from wave to wave). A state
/// may speed a chunk up, never change its result.
public func runChunks<State, R>(
  count: Int, workers states: inout [State], empty: R,
  chunk work: @Sendable (inout State, Int) -> R
) -> [R] {
  precondition(!states.isEmpty, "runChunks needs at least one worker state")
  var results = [R](repeating: empty, count: count)
  guard count > 0 else { return results }
  let next = Atomic<Int>(0)
  results.withUnsafeMutableBufferPointer { buffer in
    states.withUnsafeMutableBufferPointer { stateBuffer in
      let slots = DisjointSlots(base: buffer)
      let workerStates = DisjointSlots(base: stateBuffer)
      DispatchQueue.concurrentPerform(iterations: min(stateBuffer.count, count)) { w in
        workerStates.update(w) { state in
          while case let c = next.wrappingAdd(1, ordering: .relaxed).oldValue, c < count {
            slots.store(work(&state, c), at: c)
          }
        }
      }
    }
  }
  return results
}
