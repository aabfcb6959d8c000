import Dispatch

/// A value computed on another thread; `wait()` returns it once done.
///
/// `@unchecked Sendable`: `value` is written once, before the group is left,
/// and read only after waiting on the group, which orders the two.
package final class Pending<T: Sendable>: @unchecked Sendable {
  private var value: T?
  private let group = DispatchGroup()

  package init(_ work: @escaping @Sendable () -> T) {
    group.enter()
    DispatchQueue.global().async {
      self.value = work()
      self.group.leave()
    }
  }

  package func wait() -> T {
    group.wait()
    return value!
  }

  /// The result, given up: the caller holds the only copy (its arrays can
  /// be freed as soon as the caller is done with them).
  package func take() -> T {
    group.wait()
    defer { value = nil }
    return value!
  }
}
