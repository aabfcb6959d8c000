import Dispatch
import FanoutModel
import FanoutPipeline
import FanoutTraffic

#if canImport(Glibc)
  import Glibc
#endif

/// Reads standard input, or every connection of a Unix socket, on its own
/// thread, cutting the bytes into lines and pushing them into the queue.
/// Lines queued are *accepted*: each is evaluated exactly once. At the end
/// of an input a last line without a line end counts (as in `fanout eval`).
/// When stopped, nothing more is queued (even while waiting for room), so
/// the stop takes at most the queue's worth of batches; bytes read but not
/// queued are dropped and logged, like those still in the pipe. Then the
/// queue is closed.
final class StreamInput: @unchecked Sendable {
  private let source: StreamInputSource
  private let queue: LineQueue
  private let log: StreamLog
  private let maxLineBytes: Int
  private let listener: Int32
  /// Written to by `stop()` to wake the poll loop.
  private let wakeRead: Int32
  private let wakeWrite: Int32
  private let finished = DispatchSemaphore(value: 0)
  private var started = false

  private struct Producer {
    var fd: Int32
    var number: Int?
    var splitter: LineSplitter
    /// Lines read but refused by the queue once stopped.
    var droppedLines = 0

    var name: String { number.map { "producer \($0)" } ?? "standard input" }
  }

  /// A producer's line splitter, its limit named as the stage's option.
  private func splitter() -> LineSplitter {
    LineSplitter(maxLineBytes: maxLineBytes, limitOption: StreamOptions.maxLineBytesOption)
  }

  init(_ source: StreamInputSource, queue: LineQueue, log: StreamLog, maxLineBytes: Int)
    throws(PipelineError)
  {
    self.source = source
    self.maxLineBytes = maxLineBytes
    self.queue = queue
    self.log = log
    var fds: [Int32] = [0, 0]
    guard pipe(&fds) == 0 else {
      throw .input(
        TrafficInputError(path: "-", reason: "pipe: \(String(cString: strerror(errno)))"))
    }
    (wakeRead, wakeWrite) = (fds[0], fds[1])
    for fd in fds { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
    switch source {
    case .standardInput: listener = -1
    case .socket(let path): listener = try Self.listen(at: path)
    }
  }

  deinit {
    close(wakeRead)
    close(wakeWrite)
    // Set up but never started (the stage failed after): the reading thread did not close it.
    if !started && listener >= 0 {
      close(listener)
      if case .socket(let path) = source { unlink(path) }
    }
  }

  /// Binds and listens; a socket file left by a process that is gone is
  /// replaced, one that still accepts connections is refused.
  private static func listen(at path: String) throws(PipelineError) -> Int32 {
    func failure(_ call: String) -> PipelineError {
      .input(TrafficInputError(path: path, reason: "\(call): \(String(cString: strerror(errno)))"))
    }
    var address = sockaddr_un()
    address.sun_family = sa_family_t(AF_UNIX)
    let capacity = MemoryLayout.size(ofValue: address.sun_path)
    guard path.utf8.count < capacity else {
      throw .input(
        TrafficInputError(path: path, reason: "socket path longer than \(capacity - 1) bytes"))
    }
    withUnsafeMutableBytes(of: &address.sun_path) { raw in
      for (i, byte) in path.utf8.enumerated() { raw[i] = byte }
    }
    let length = socklen_t(MemoryLayout<sockaddr_un>.size)
    let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { throw failure("socket") }
    func bindSocket() -> Int32 {
      withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) }
      }
    }
    if bindSocket() != 0 {
      guard errno == EADDRINUSE else {
        close(fd)
        throw failure("bind")
      }
      let probe = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
      let alive = withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(probe, $0, length) == 0 }
      }
      close(probe)
      var st = stat()
      guard !alive, lstat(path, &st) == 0, (st.st_mode & S_IFMT) == S_IFSOCK else {
        close(fd)
        throw .input(
          TrafficInputError(path: path, reason: "in use by another process, or not a socket"))
      }
      unlink(path)
      guard bindSocket() == 0 else {
        close(fd)
        throw failure("bind")
      }
    }
    guard Glibc.listen(fd, 64) == 0 else {
      close(fd)
      throw failure("listen")
    }
    return fd
  }

  /// File descriptors left for everything but producers.
  static let reservedDescriptors = 64

  func start() {
    started = true
    DispatchQueue(label: "fanout.input").async {
      self.run()
      self.finished.signal()
    }
  }

  /// Stops reading and queueing: lines already queued are still evaluated.
  func stop() {
    queue.stopAccepting()
    _ = write(wakeWrite, "x", 1)
  }

  /// Waits until the reading thread has closed every input.
  func waitUntilFinished() { finished.wait() }

  private func run() {
    var producers: [Producer] = []
    var connections = 0
    if case .standardInput = source {
      producers.append(
        Producer(fd: STDIN_FILENO, number: nil, splitter: splitter()))
    }
    var buffer = [UInt8](repeating: 0, count: 1 << 16)
    /// Out of file descriptors: new connections wait (in the socket's
    /// backlog) until then, while the producers connected go on.
    var acceptPausedUntil: ContinuousClock.Instant? = nil
    var acceptFailureLogged = false
    // File descriptors are kept for the output (segment files, metrics, the
    // snapshot's connections): producers beyond this wait to be accepted.
    var limit = rlimit()
    getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    let maxProducers = max(1, Int(clamping: limit.rlim_cur) - Self.reservedDescriptors)
    var atProducerLimit = false
    reading: while true {
      if let until = acceptPausedUntil, ContinuousClock.now >= until { acceptPausedUntil = nil }
      if (producers.count >= maxProducers) != atProducerLimit {
        atProducerLimit.toggle()
        if atProducerLimit {
          log.event(
            "producers_at_limit",
            "\(producers.count) producers connected, the most open files allow "
              + "(ulimit -n \(limit.rlim_cur)); new ones wait until one disconnects",
            level: .warning, ["producers": .int(producers.count)])
        }
      }
      let accepting = listener >= 0 && acceptPausedUntil == nil && !atProducerLimit
      var polled = [pollfd(fd: wakeRead, events: Int16(POLLIN), revents: 0)]
      if accepting { polled.append(pollfd(fd: listener, events: Int16(POLLIN), revents: 0)) }
      let firstProducer = polled.count
      for p in producers { polled.append(pollfd(fd: p.fd, events: Int16(POLLIN), revents: 0)) }
      if poll(&polled, nfds_t(polled.count), acceptPausedUntil == nil ? -1 : 100) < 0 {
        if errno == EINTR { continue }
        let reason = String(cString: strerror(errno))
        log.event(
          "poll_failed", "cannot poll the input: \(reason)", level: .error,
          ["error": .text(reason)])
        break
      }
      if polled[0].revents != 0 { break }
      var ended: [Int] = []
      for k in 0..<(polled.count - firstProducer) where polled[firstProducer + k].revents != 0 {
        let n: Int
        do {
          n = try readInput(producers[k].fd, into: &buffer, path: "producer")
        } catch {
          log.event(
            "producer_failed", "\(producers[k].name): \(error.reason); closing it",
            level: .warning, ["producer": .text(producers[k].name), "error": .text(error.reason)])
          n = 0
        }
        if n > 0 {
          buffer.withUnsafeBytes {
            producers[k].splitter.append(UnsafeRawBufferPointer(rebasing: $0[0..<n]))
          }
          push(&producers[k], final: false)
        } else {
          ended.append(k)
        }
      }
      for k in ended.reversed() {
        let producer = finish(producers.remove(at: k))
        if producer.number == nil { break reading }  // end of standard input
        log.event(
          "producer_disconnected", "\(producer.name) disconnected",
          ["producer": .text(producer.name)])
      }
      if accepting && polled[1].revents != 0 {
        let fd = accept(listener, nil, nil)
        let failure = SystemCallError(call: "accept", code: fd < 0 ? errno : 0)
        if fd < 0 && (failure.code == EMFILE || failure.code == ENFILE) {
          if !acceptFailureLogged {
            log.event(
              "accept_failed",
              "cannot accept a producer: \(failure.reason); connected producers go on, new ones wait",
              level: .warning, ["error": .text(failure.reason)])
            acceptFailureLogged = true
          }
          acceptPausedUntil = .now + .milliseconds(100)
        }
        if fd >= 0 {
          acceptFailureLogged = false
          _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
          connections += 1
          producers.append(
            Producer(
              fd: fd, number: connections, splitter: splitter()))
          log.event(
            "producer_connected", "producer \(connections) connected",
            ["producer": .text("producer \(connections)")])
        }
      }
    }
    // Stopped: what was read but not queued is not accepted.
    for producer in producers {
      let lines = producer.droppedLines + producer.splitter.completeLines
      if lines > 0 || producer.splitter.bufferedBytes > 0 {
        log.event(
          "input_dropped",
          "\(producer.name): \(lines) complete lines and \(producer.splitter.bufferedBytes) "
            + "more bytes read but not accepted were dropped at the stop", level: .warning,
          [
            "producer": .text(producer.name), "lines": .int(lines),
            "bytes": .int(producer.splitter.bufferedBytes),
          ])
      }
      if producer.fd != STDIN_FILENO { close(producer.fd) }
    }
    if listener >= 0 {
      close(listener)
      if case .socket(let path) = source { unlink(path) }
    }
    queue.close()
  }

  /// Queues the producer's complete lines, at most a queue's worth at a
  /// time, so that the queue never holds more than its capacity. Once
  /// stopped, the lines not queued are counted as dropped.
  private func push(_ producer: inout Producer, final: Bool) {
    while let block = producer.splitter.take(maxLines: queue.capacity, final: final) {
      guard queue.push(ArrivedLines(block: block, producer: producer.number, arrival: .now)) else {
        producer.droppedLines += block.count
        return
      }
    }
  }

  private func finish(_ producer: Producer) -> Producer {
    var producer = producer
    push(&producer, final: true)
    if producer.fd != STDIN_FILENO { close(producer.fd) }
    return producer
  }
}
