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
    // Files written later are checked now: a bad path is a bad command line,
    // found before any input is consumed.
    for (option, path) in [("--metrics", options.metricsPath), ("--ready-file", options.readyFile)]
    {
      if let path { try Self.checkWritable(path, option: option) }
    }
    first = try LoadedSnapshot.load(
      path: options.snapshot, generation: 1,
      busyTimeoutMilliseconds: options.busyTimeoutMilliseconds)
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
      busyTimeoutMilliseconds: options.busyTimeoutMilliseconds)
  }

  /// Whether a file can be written at `path` (aside, then renamed): a
  /// trial file is made beside it and removed.
  static func checkWritable(_ path: String, option: String) throws(PipelineError) {
    do {
      let (directory, name) = splitPath(path)
      try PendingFile(directory: directory, name: name).discard()
    } catch {
      throw .usage("\(option) '\(path)' cannot be written: \(error.reason)")
    }
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

  /// How late a line may be, behind the newest line before it, for rule 8
  /// to count its earlier deliveries exactly: the stage runs for ever, so
  /// its throttle ledger forgets deliveries older than the newest ts minus
  /// the window minus this (one hour).
  public static let throttleRetention: Int64 = 3_600_000

  /// Loads the snapshot file again in the background (SIGHUP).
  public func requestReload() { reloader.reload(because: "SIGHUP") }

  /// Runs until the input ends or a stop is requested; returns the totals.
  public func run() throws(PipelineError) -> StreamReport {
    var snapshot = first
    let threads = options.threads
    let encoding = sink.encoding
    func engine(for snapshot: LoadedSnapshot) -> EvaluationEngine<StreamWork> {
      EvaluationEngine(
        index: snapshot.index, threads: threads,
        work: StreamWork(index: snapshot.index, encoding: encoding),
        throttleRetention: StreamStage.throttleRetention)
    }
    var evaluation = engine(for: snapshot)
    var metrics = StreamMetrics(metricsPath: options.metricsPath)
    var nextStatus = ContinuousClock.now + .seconds(options.statusSeconds)
    var batchNumber = 0
    let source =
      switch options.input {
      case .standardInput: "standard input"
      case .socket(let path): "socket \(path)"
      }
    log.event(
      "snapshot_loaded",
      "reading \(source); snapshot generation 1 (\(snapshot.path), inode \(snapshot.identity.inode)) "
        + "loaded in \(threeDecimals(snapshot.loadSeconds)) s", snapshot.logFields)
    input.start()
    log.event("ready", "ready: reading \(source)", ["source": .text(source)])
    if let path = options.readyFile {
      do { try writeMetrics(Array("\(getpid())\n".utf8), to: path) } catch {
        throw .output(error)
      }
    }
    defer { if let path = options.readyFile { unlink(path) } }

    func reportStatus() throws(PipelineError) {
      let report = metrics.closeInterval(
        queueDepth: queue.depth, queueCapacity: queue.capacity, snapshot: snapshot,
        reloadsRefused: reloader.refusedCount)
      log.event("status", report.line, ["metrics": .json(report.json)])
      if let path = options.metricsPath {
        // Metrics are a view of the stage, not its output: a failure to
        // write them is logged and the stage goes on.
        do { try writeMetrics(report.file, to: path) } catch {
          log.event(
            "metrics_not_written", "cannot write the metrics: \(error); going on", level: .warning)
        }
      }
      nextStatus = .now + .seconds(options.statusSeconds)
    }

    // Between batches: swap in a loaded snapshot, rotate, report.
    func betweenBatches() throws(PipelineError) {
      if let loaded = reloader.takeReady() {
        do { try sink.snapshotChanged() } catch { throw .output(error) }
        snapshot = loaded
        let previous = evaluation
        evaluation = engine(for: loaded)
        evaluation.inheritThrottles(from: previous)
        log.event(
          "snapshot_in_use",
          "snapshot generation \(loaded.generation) in use from batch \(batchNumber + 1)",
          ["generation": .int(loaded.generation), "batch": .int(batchNumber + 1)])
      }
      do { try sink.tick() } catch { throw .output(error) }
      if ContinuousClock.now >= nextStatus { try reportStatus() }
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
      batchNumber += 1
      let batch = EvaluatedBatch.evaluate(
        arrived, number: batchNumber, snapshot: snapshot, engine: evaluation)
      do { try sink.write(batch) } catch { throw .output(error) }
      metrics.record(batch, latency: ContinuousClock.now - arrived[0].arrival)
    }
    input.waitUntilFinished()
    do { try sink.finish() } catch { throw .output(error) }
    try reportStatus()
    let reason = stopReason.withLock { $0 } ?? "end of input"
    log.event("stopped", metrics.finalLine(reason: reason), metrics.finalFields(reason: reason))
    return StreamReport(totals: metrics.total, latency: metrics.runLatency)
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
