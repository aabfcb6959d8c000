import FanoutTraffic

#if canImport(Glibc)
  import Glibc
#endif

/// Lines read from one producer, as they arrived.
struct ArrivedLines: Sendable {
  var block: LineBlock
  /// The connection number for socket input (from 1), nil for standard input.
  var producer: Int?
  var arrival: ContinuousClock.Instant
}

/// The bounded queue between reading and evaluation. `push` blocks while the
/// queue is full, so when evaluation falls behind, reading pauses (and the
/// producers' pipes and sockets fill) instead of memory growing.
final class LineQueue: @unchecked Sendable {
  let capacity: Int
  // The lock and condition live at fixed addresses, as pthreads requires.
  private let mutex = UnsafeMutablePointer<pthread_mutex_t>.allocate(capacity: 1)
  private let changed = UnsafeMutablePointer<pthread_cond_t>.allocate(capacity: 1)
  private var items: [ArrivedLines] = []
  private var head = 0
  private var lines = 0
  private var closed = false
  private var stopping = false

  init(capacity: Int) {
    self.capacity = capacity
    pthread_mutex_init(mutex, nil)
    var attributes = pthread_condattr_t()
    pthread_condattr_init(&attributes)
    pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC)
    pthread_cond_init(changed, &attributes)
    pthread_condattr_destroy(&attributes)
  }

  deinit {
    pthread_cond_destroy(changed)
    pthread_mutex_destroy(mutex)
    mutex.deallocate()
    changed.deallocate()
  }

  private func locked<T>(_ body: () -> T) -> T {
    pthread_mutex_lock(mutex)
    defer { pthread_mutex_unlock(mutex) }
    return body()
  }

  /// Lines waiting.
  var depth: Int { locked { lines } }

  /// Queues at most `capacity` lines; waits while they do not fit. False,
  /// and nothing queued, once `stopAccepting` has been called.
  func push(_ arrived: ArrivedLines) -> Bool {
    precondition(arrived.block.count <= capacity)
    return locked {
      while !stopping && lines + arrived.block.count > capacity {
        pthread_cond_wait(changed, mutex)
      }
      guard !stopping else { return false }
      items.append(arrived)
      lines += arrived.block.count
      pthread_cond_broadcast(changed)
      return true
    }
  }

  /// Refuses further lines, waking a `push` that waits for room.
  func stopAccepting() {
    locked {
      stopping = true
      pthread_cond_broadcast(changed)
    }
  }

  /// No more lines will come.
  func close() {
    locked {
      closed = true
      pthread_cond_broadcast(changed)
    }
  }

  enum Taken {
    case lines([ArrivedLines])
    case timedOut
    /// Closed, and every line has been taken.
    case finished
  }

  /// Up to `maxLines` lines, waiting until at least one is queued, the
  /// queue is closed and empty, or `deadline` passes.
  func take(maxLines: Int, waitingUntil deadline: ContinuousClock.Instant) -> Taken {
    locked {
      while lines == 0 && !closed {
        let remaining = deadline - ContinuousClock.now
        if remaining <= .zero { return .timedOut }
        var until = timespec()
        clock_gettime(CLOCK_MONOTONIC, &until)
        let (seconds, attoseconds) = remaining.components
        let nanoseconds = Int(until.tv_nsec) + Int(attoseconds / 1_000_000_000)
        until.tv_sec += Int(seconds) + nanoseconds / 1_000_000_000
        until.tv_nsec = nanoseconds % 1_000_000_000
        pthread_cond_timedwait(changed, mutex, &until)
      }
      if lines == 0 { return .finished }
      var taken: [ArrivedLines] = []
      var wanted = maxLines
      while wanted > 0 && head < items.count {
        let first = items[head]
        if first.block.count <= wanted {
          taken.append(first)
          wanted -= first.block.count
          head += 1
        } else {
          var part = first
          part.block = first.block.lines(0..<wanted)
          taken.append(part)
          items[head].block = first.block.lines(wanted..<first.block.count)
          wanted = 0
        }
      }
      lines -= maxLines - wanted
      if head > 64 && head * 2 > items.count {
        items.removeFirst(head)
        head = 0
      }
      pthread_cond_broadcast(changed)
      return .lines(taken)
    }
  }
}
