import Dispatch
import Synchronization

/// Workers write disjoint slots (slot i belongs to chunk i), so sharing the base is safe.
private struct DisjointSlots<T>: @unchecked Sendable {
  let base: UnsafeMutableBufferPointer<T>
  func store(_ value: consuming T, at i: Int) { base[i] = value }
}

/// Runs `work` for chunks `0..<count` on up to `workers` threads and returns
/// the results in chunk order. Which thread runs which chunk varies; what a
/// chunk computes must depend only on its number.
public func runChunks<R>(count: Int, workers: Int, empty: R, _ work: @Sendable (Int) -> R) -> [R] {
  runChunks(count: count, workers: workers, empty: empty, worker: {}, chunk: { _, c in work(c) })
}

/// `runChunks` with per-thread state: each worker thread makes its own with
/// `makeWorker` and passes it to every chunk it runs (an `Evaluator`, so
/// that its scratch space and shared answers carry from chunk to chunk).
/// The state may speed a chunk up, never change its result.
public func runChunks<State, R>(
  count: Int, workers: Int, empty: R, worker makeWorker: @Sendable () -> State,
  chunk work: @Sendable (inout State, Int) -> R
) -> [R] {
  var results = [R](repeating: empty, count: count)
  guard count > 0 else { return results }
  let next = Atomic<Int>(0)
  results.withUnsafeMutableBufferPointer { buffer in
    let slots = DisjointSlots(base: buffer)
    DispatchQueue.concurrentPerform(iterations: max(1, min(workers, count))) { _ in
      var state = makeWorker()
      while case let c = next.wrappingAdd(1, ordering: .relaxed).oldValue, c < count {
        slots.store(work(&state, c), at: c)
      }
    }
  }
  return results
}
