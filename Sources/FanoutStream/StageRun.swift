import FanoutEngine
import FanoutModel
import FanoutOutput
import FanoutPipeline

#if canImport(Glibc)
  import Glibc
#endif

/// What a stage keeps while it runs, whatever its source: the snapshot in use and its
/// evaluation engine, swapped between batches when a reload is ready; the
/// batch count; the metrics and their status reports; the ready file.
struct StageRun {
  let options: StreamOptions
  let log: StreamLog
  let reloader: SnapshotReloader
  private let encoding: DeliveryEncoding
  private(set) var snapshot: LoadedSnapshot
  private(set) var evaluation: EvaluationEngine<StreamWork>
  private(set) var metrics: StreamMetrics
  private var nextStatus: ContinuousClock.Instant
  /// Batches evaluated so far; the next one's number is one more.
  var batchNumber = 0

  /// How late a line may be, behind the newest line before it, for rule 8
  /// to count its earlier deliveries exactly: a stage runs for ever, so its
  /// throttle ledger forgets deliveries older than the newest ts minus the
  /// window minus this (one hour).
  static let throttleRetention: Int64 = 3_600_000

  /// Checks the files the stage writes later (a bad path is a bad command
  /// line, found before any input is consumed), then loads the first snapshot.
  static func prepare(_ options: StreamOptions) throws(PipelineError) -> LoadedSnapshot {
    let written = [("--metrics", options.metricsPath), ("--ready-file", options.readyFile)]
      .compactMap { option, path in path.map { (option, $0) } }
    // Neither is written over what the stage reads (the ready file is also
    // removed at the end) — the snapshot, standard input when it is a file
    // — nor over the other.
    var taken: [(what: String, file: FileIdentity)] = []
    if let snapshot = FileIdentity(path: options.snapshot) {
      taken.append(("the snapshot the stage reads", snapshot))
    }
    if let input = FileIdentity(regularFileOpenAs: STDIN_FILENO) {
      taken.append(("the file the stage reads on standard input", input))
    }
    for (option, path) in written {
      if let refusal = standardOutputRefusal(option, path, kind: "file") { throw .usage(refusal) }
    }
    if written.count == 2 && written[0].1 == written[1].1 {
      throw .usage("--metrics and --ready-file name one file, '\(written[0].1)': name two")
    }
    for (option, path) in written {
      if let file = FileIdentity(path: path) {
        if let other = taken.first(where: { $0.file == file }) {
          throw .usage("\(option) '\(path)' is \(other.what): name another file")
        }
        taken.append(("the \(option) file", file))
      }
      try checkWritable(path, option: option)
    }
    return try LoadedSnapshot.load(
      path: options.snapshot, generation: 1,
      busyTimeoutMilliseconds: options.busyTimeoutMilliseconds, cache: options.indexCache)
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

  init(
    options: StreamOptions, log: StreamLog, first: LoadedSnapshot, reloader: SnapshotReloader,
    encoding: DeliveryEncoding
  ) {
    self.options = options
    self.log = log
    self.reloader = reloader
    self.encoding = encoding
    snapshot = first
    evaluation = Self.engine(for: first, threads: options.threads, encoding: encoding)
    metrics = StreamMetrics(metricsPath: options.metricsPath)
    nextStatus = .now + .seconds(options.statusSeconds)
  }

  private static func engine(
    for snapshot: LoadedSnapshot, threads: Int, encoding: DeliveryEncoding
  ) -> EvaluationEngine<StreamWork> {
    let engine = EvaluationEngine(
      index: snapshot.index, threads: threads,
      work: StreamWork(index: snapshot.index, encoding: encoding),
      throttleRetention: throttleRetention)
    engine.keepsUpdates = true
    return engine
  }

  /// Logs that the stage reads `source`, and writes the ready file (its pid).
  func announceReady(reading source: String) throws(PipelineError) {
    log.event("ready", "ready: reading \(source)", ["source": .text(source)])
    guard let path = options.readyFile else { return }
    do { try writeMetrics(Array("\(getpid())\n".utf8), to: path) } catch { throw .output(error) }
  }

  /// Removes the ready file at the end of the run.
  func withdrawReady() {
    if let path = options.readyFile { unlink(path) }
  }

  /// Puts a snapshot the reloader has ready in use from the next batch,
  /// the throttle state carried over; `before` runs first (a segment ends).
  mutating func swapIfReloaded(before: () throws(PipelineError) -> Void = {})
    throws(PipelineError)
  {
    guard let loaded = reloader.takeReady() else { return }
    try before()
    snapshot = loaded
    let previous = evaluation
    evaluation = Self.engine(for: loaded, threads: options.threads, encoding: encoding)
    evaluation.inheritLedgers(from: previous)
    log.event(
      "snapshot_in_use",
      "snapshot generation \(loaded.generation) in use from batch \(batchNumber + 1)",
      ["generation": .int(loaded.generation), "batch": .int(batchNumber + 1)])
  }

  mutating func record(_ written: [WrittenBatch]) {
    for done in written { metrics.record(done.batch, latency: done.latency) }
  }

  /// The status line and the metrics file, when they are due (`force`: now).
  mutating func reportStatus(_ source: SourceStatus, force: Bool = false) {
    guard force || ContinuousClock.now >= nextStatus else { return }
    let report = metrics.closeInterval(
      queueDepth: source.queueDepth, queueCapacity: source.queueCapacity, snapshot: snapshot,
      reloadsRefused: reloader.refusedCount, lag: source.lag())
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

  /// Logs the last line (the run's totals) and returns them.
  func finish(reason: String) -> StreamReport {
    log.event("stopped", metrics.finalLine(reason: reason), metrics.finalFields(reason: reason))
    return StreamReport(totals: metrics.total, latency: metrics.runLatency)
  }
}
