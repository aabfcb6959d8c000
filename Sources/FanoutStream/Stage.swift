import FanoutEngine
import FanoutModel
import FanoutPipeline
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// `fanout stream`: the stage, whatever it reads. One lifecycle (first
/// snapshot, ready file, reloads swapped in between batches, status
/// reports, a stop that finishes what was taken) and one batch loop (a
/// batch is what arrives within `--batch-ms` of its first line, up to
/// `--batch-messages` lines); the source says where lines come from and
/// where a batch goes: standard input or a socket into segment files or
/// standard output (`LineSource`), or a Redis stream (`BusSource`).
final class Stage<Source: StageSource>: StreamStage {
  private let options: StreamOptions
  private let log: StreamLog
  private let first: LoadedSnapshot
  private let reloader: SnapshotReloader
  private let stopReason = Mutex<String?>(nil)
  // Its reading side may be stopped from any thread; the rest is used only
  // by the thread in `run()`.
  private nonisolated(unsafe) let source: Source

  /// Loads the first snapshot, then sets the source up (`makeSource`): a
  /// refused snapshot leaves nothing behind and consumes no input.
  init(
    _ options: StreamOptions, log: StreamLog,
    makeSource: () throws(PipelineError) -> Source
  ) throws(PipelineError) {
    self.options = options
    self.log = log
    first = try StageRun.prepare(options)
    source = try makeSource()
    reloader = SnapshotReloader(
      current: first, log: log, watchEvery: options.watchSeconds,
      busyTimeoutMilliseconds: options.busyTimeoutMilliseconds, cache: options.indexCache)
  }

  func requestStop(because reason: String) {
    let isFirst = stopReason.withLock { current -> Bool in
      defer { current = current ?? reason }
      return current == nil
    }
    guard isFirst else { return }
    log.event(
      "stopping", "\(reason): finishing \(Source.inFlight)", ["reason": .text(reason)])
    source.stop()
  }

  func requestReload() { reloader.reload(because: "SIGHUP") }

  func run() throws(PipelineError) -> StreamReport {
    do { return try runBatches() } catch {
      // The stage lives on in the signal handler's hands: nothing would
      // remove what it half wrote.
      source.abandon()
      throw error
    }
  }

  private func runBatches() throws(PipelineError) -> StreamReport {
    var run = StageRun(
      options: options, log: log, first: first, reloader: reloader, encoding: source.encoding)
    log.event(
      "snapshot_loaded",
      "snapshot generation 1 (\(first.path), inode \(first.identity.inode)) loaded in "
        + "\(threeDecimals(first.loadSeconds)) s; \(source.opening)", first.logFields)
    guard try source.open() else { return run.finish(reason: currentStopReason ?? "stopped") }
    try run.announceReady(reading: source.name)
    defer { run.withdrawReady() }

    // Between batches: swap in a loaded snapshot, rotate, report.
    func betweenBatches() throws(PipelineError) {
      try run.swapIfReloaded(before: source.snapshotWillChange)
      try source.tick()
      run.reportStatus(source.status)
    }

    let idleWake = Duration.milliseconds(100)
    var finished = false
    while !finished {
      try betweenBatches()
      // Wait for a first line, waking now and then to swap, rotate and report.
      var pieces: [Source.Piece]
      var count: Int
      let arrival: ContinuousClock.Instant
      switch try source.take(
        maxLines: options.batchLines, until: .now + idleWake, startsBatch: true)
      {
      case .timedOut, .interrupted:
        // Idle: a batch still being written is waited for.
        try run.record(source.settle())
        continue
      case .finished:
        finished = true
        continue
      case .taken(let taken, let lines, let at): (pieces, count, arrival) = (taken, lines, at)
      }
      // Fill the batch until it has its lines or its time is up.
      let deadline = arrival + .milliseconds(options.batchMilliseconds)
      var interrupted = false
      filling: while count < options.batchLines {
        switch try source.take(
          maxLines: options.batchLines - count, until: deadline, startsBatch: false)
        {
        case .timedOut: break filling
        case .finished:
          finished = true
          break filling
        case .interrupted:
          interrupted = true
          break filling
        case .taken(let more, let lines, _):
          pieces += more
          count += lines
        }
      }
      guard !interrupted else { continue }
      run.batchNumber += 1
      try run.record(
        source.deliver(
          pieces, number: run.batchNumber, arrival: arrival, snapshot: run.snapshot,
          engine: run.evaluation))
    }
    try run.record(source.settle())
    try source.close()
    run.reportStatus(source.status, force: true)
    return run.finish(reason: currentStopReason ?? Source.endReason)
  }

  private var currentStopReason: String? { stopReason.withLock { $0 } }
}

/// What a stage reads and where its batches go. Its methods are called by
/// the stage's thread, but `stop()`, which may come from any thread.
protocol StageSource: AnyObject {
  /// What a batch is made of (lines as they arrived, or bus entries).
  associatedtype Piece
  /// What a stop lets finish, for the log ("the lines already read").
  static var inFlight: String { get }
  /// Why the run ended when no stop was asked.
  static var endReason: String { get }
  /// Where it reads, for the log and the ready line.
  var name: String { get }
  /// The first log line's end: what the stage does next.
  var opening: String { get }
  var encoding: DeliveryEncoding { get }
  /// Starts reading; false when a stop came first.
  func open() throws(PipelineError) -> Bool
  /// Up to `maxLines` more lines, waiting until `deadline`; `startsBatch`
  /// when they are a batch's first.
  func take(maxLines: Int, until deadline: ContinuousClock.Instant, startsBatch: Bool)
    throws(PipelineError) -> SourceTake<Piece>
  /// Evaluates a batch (whose first line arrived at `arrival`) and writes
  /// or commits it; returns the batches written since the last call: this
  /// one, or on a bus the one before it, whose transaction the server
  /// applied while this one was evaluated (and after a lost connection,
  /// those sent again).
  func deliver(
    _ pieces: [Piece], number: Int, arrival: ContinuousClock.Instant, snapshot: LoadedSnapshot,
    engine: EvaluationEngine<StreamWork>
  ) throws(PipelineError) -> [WrittenBatch]
  /// Waits for the batch still being written, if any (when idle, and at
  /// the end); returns it if it was written.
  func settle() throws(PipelineError) -> [WrittenBatch]
  /// The next batch is evaluated against another snapshot.
  func snapshotWillChange() throws(PipelineError)
  /// Between batches and while idle (rotation by age).
  func tick() throws(PipelineError)
  /// What the status line says about the input.
  var status: SourceStatus { get }
  /// Stops reading (any thread): what was read is still taken.
  func stop()
  /// After the last batch: waits for the reader and closes every file.
  func close() throws(PipelineError)
  /// The run failed: removes what was written but not published (the
  /// open segment's partial files) and releases the output folder.
  func abandon()
}

/// A batch written, and how long after its first line arrived.
struct WrittenBatch {
  var batch: EvaluatedBatch
  var latency: Duration
}

/// What a source gives when asked for lines.
enum SourceTake<Piece> {
  /// Pieces holding `lines` lines; the first arrived at `arrival`.
  case taken([Piece], lines: Int, arrival: ContinuousClock.Instant)
  /// Nothing by the deadline.
  case timedOut
  /// The input ended, or a stop was asked: nothing more will come.
  case finished
  /// The batch being filled is dropped (a lost connection).
  case interrupted
}

/// The input's side of a status report.
struct SourceStatus {
  var queueDepth = 0
  var queueCapacity = 0
  /// (entries read but not acknowledged, entries not yet read); asked only
  /// when a report is due (on a bus it is a round trip).
  var lag: () -> (pending: Int64, behind: Int64?)? = { nil }
}

/// A stage, set up (first snapshot loaded, input open): `run()` evaluates
/// until the input ends or a stop is requested; `requestStop` and
/// `requestReload` may be called from any thread.
public protocol StreamStage: Sendable {
  func run() throws(PipelineError) -> StreamReport
  /// Stops taking input; what was taken is evaluated and written.
  func requestStop(because reason: String)
  /// Loads the snapshot file again in the background.
  func requestReload()
}

extension StreamOptions {
  /// The stage these options describe — on `redis` when given — set up:
  /// the first snapshot loaded, then the input opened and the output made
  /// ready (a refused snapshot leaves nothing behind and consumes nothing).
  public func makeStage(redis: RedisOptions? = nil) throws(PipelineError) -> any StreamStage {
    let log = StreamLog(format: logFormat)
    if let redis {
      return try Stage(self, log: log) { BusSource(self, bus: RedisBus(redis), log: log) }
    }
    return try Stage(self, log: log) { () throws(PipelineError) in try LineSource(self, log: log) }
  }

  /// Runs the stage these options describe with the termination signals
  /// its own: SIGTERM and SIGINT stop it (what was taken is finished),
  /// SIGHUP reloads the snapshot. A signal that arrives while the first
  /// snapshot loads is kept and acted on once the stage exists.
  public func runStage(redis: RedisOptions? = nil) throws(PipelineError) -> StreamReport {
    // A consumer that goes away is an output error, not a silent death.
    signal(SIGPIPE, SIG_IGN)
    let control = StageControl()
    TerminationSignals.handle { number in
      if number == SIGHUP {
        control.reload()
      } else {
        control.stop(because: TerminationSignals.name(number))
      }
    }
    let stage = try makeStage(redis: redis)
    control.attach(stage)
    return try stage.run()
  }
}

/// Forwards signals to the stage, keeping those that arrive before it exists.
final class StageControl: Sendable {
  private struct State {
    var stage: (any StreamStage)?
    var stopReason: String?
    var reloadRequested = false
  }
  private let state = Mutex(State())

  func stop(because reason: String) {
    let stage = state.withLock { state -> (any StreamStage)? in
      if state.stage == nil { state.stopReason = state.stopReason ?? reason }
      return state.stage
    }
    stage?.requestStop(because: reason)
  }

  func reload() {
    let stage = state.withLock { state -> (any StreamStage)? in
      if state.stage == nil { state.reloadRequested = true }
      return state.stage
    }
    stage?.requestReload()
  }

  /// The stage is set up: what was asked meanwhile is done now.
  func attach(_ stage: any StreamStage) {
    let (stopReason, reload) = state.withLock { state in
      state.stage = stage
      return (state.stopReason, state.reloadRequested)
    }
    if reload { stage.requestReload() }
    if let stopReason { stage.requestStop(because: stopReason + ", received while loading") }
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
