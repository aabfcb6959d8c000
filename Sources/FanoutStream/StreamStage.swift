import FanoutOutput
import FanoutPipeline
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// The stage, set up: snapshot loaded, input open, output ready. `run()`
/// evaluates until the input ends or `requestStop` is called, then finishes
/// the accepted lines and closes every file. `requestStop` and
/// `requestReload` may be called from any thread (the command line calls
/// them on signals).
public final class StreamStage: Sendable {
  private let options: StreamOptions
  private let log: StreamLog
  private let first: LoadedSnapshot
  private let queue: LineQueue
  private let input: StreamInput
  private let reloader: SnapshotReloader
  private let stopReason = Mutex<String?>(nil)
  // Used only by the thread in `run()`.
  private nonisolated(unsafe) let sink: any BatchSink

  public init(_ options: StreamOptions) throws(PipelineError) {
    log = StreamLog(format: options.logFormat)
    self.options = options
    first = try StageRun.prepare(options)
    queue = LineQueue(capacity: options.queueLines)
    input = try StreamInput(
      options.input, queue: queue, log: log, maxLineBytes: options.maxLineBytes)
    // The output folder last: a refused snapshot or socket leaves nothing behind.
    switch options.destination {
    case .directory(let path):
      sink = try SegmentWriter(
        directory: path, rotateBytes: options.rotateBytes, rotateSeconds: options.rotateSeconds,
        log: log)
    case .standardOutput:
      sink = StandardOutputSink()
    }
    reloader = SnapshotReloader(
      current: first, log: log, watchEvery: options.watchSeconds,
      busyTimeoutMilliseconds: options.busyTimeoutMilliseconds, cache: options.indexCache)
  }

  /// Stops reading; the lines already read are evaluated and written.
  public func requestStop(because reason: String) {
    let isFirst = stopReason.withLock { current -> Bool in
      defer { current = current ?? reason }
      return current == nil
    }
    guard isFirst else { return }
    log.event("stopping", "\(reason): finishing the lines already read", ["reason": .text(reason)])
    input.stop()
  }

  /// Loads the snapshot file again in the background (SIGHUP).
  public func requestReload() { reloader.reload(because: "SIGHUP") }

  /// Runs until the input ends or a stop is requested; returns the totals.
  public func run() throws(PipelineError) -> StreamReport {
    var run = StageRun(
      options: options, log: log, first: first, reloader: reloader, encoding: sink.encoding)
    let source =
      switch options.input {
      case .standardInput: "standard input"
      case .socket(let path): "socket \(path)"
      }
    log.event(
      "snapshot_loaded",
      "reading \(source); snapshot generation 1 (\(first.path), inode \(first.identity.inode)) "
        + "loaded in \(threeDecimals(first.loadSeconds)) s", first.logFields)
    input.start()
    try run.announceReady(reading: source)
    defer { run.withdrawReady() }

    // Between batches: swap in a loaded snapshot (its segment ends), rotate, report.
    func betweenBatches() throws(PipelineError) {
      try run.swapIfReloaded { () throws(PipelineError) in
        do throws(OutputError) { try sink.snapshotChanged() } catch { throw .output(error) }
      }
      do { try sink.tick() } catch { throw .output(error) }
      run.reportStatus(queueDepth: queue.depth, queueCapacity: queue.capacity)
    }

    let idleWake = Duration.milliseconds(100)
    var finished = false
    while !finished {
      try betweenBatches()
      // Wait for a first line, waking now and then to swap, rotate and report.
      var arrived: [ArrivedLines]
      switch queue.take(maxLines: options.batchLines, waitingUntil: .now + idleWake) {
      case .timedOut: continue
      case .finished:
        finished = true
        continue
      case .lines(let lines): arrived = lines
      }
      // Fill the batch until it has its lines or its time is up.
      let deadline = arrived[0].arrival + .milliseconds(options.batchMilliseconds)
      var count = arrived.reduce(0) { $0 + $1.block.count }
      filling: while count < options.batchLines {
        switch queue.take(maxLines: options.batchLines - count, waitingUntil: deadline) {
        case .timedOut: break filling
        case .finished:
          finished = true
          break filling
        case .lines(let more):
          arrived += more
          count += more.reduce(0) { $0 + $1.block.count }
        }
      }
      run.batchNumber += 1
      let batch = EvaluatedBatch.evaluate(
        arrived, number: run.batchNumber, snapshot: run.snapshot, engine: run.evaluation)
      do { try sink.write(batch) } catch { throw .output(error) }
      run.record(batch, latency: ContinuousClock.now - arrived[0].arrival)
    }
    input.waitUntilFinished()
    do { try sink.finish() } catch { throw .output(error) }
    run.reportStatus(queueDepth: queue.depth, queueCapacity: queue.capacity, force: true)
    return run.finish(reason: stopReason.withLock { $0 } ?? "end of input")
  }
}

/// The totals of a finished stream.
public struct StreamReport: Sendable {
  public let batches: Int
  public let lines: Int
  public let messages: Int
  public let rejected: Int
  public let pairs: Int
  public let delivered: Int
  /// Batch latency over the run, from a line's arrival to its batch being written.
  public let batchLatencyP50Millis: Double
  public let batchLatencyP99Millis: Double

  init(totals: StreamTotals, latency: LatencyHistogram) {
    batchLatencyP50Millis = latency.percentileMillis(0.5)
    batchLatencyP99Millis = latency.percentileMillis(0.99)
    batches = totals.batches
    lines = totals.lines
    messages = totals.messages
    rejected = totals.rejected
    pairs = totals.pairs
    delivered = totals.delivered
  }
}
