import FanoutEngine
import FanoutIndex
import FanoutKernel
import FanoutModel
import FanoutOutput
import FanoutSnapshot
import FanoutTime
import FanoutTraffic

/// What `fanout eval` is asked to do.
public struct EvalOptions: Sendable {
  public var snapshot: String
  public var messages: String
  public var out: String
  public var decisions: Bool
  /// Counters only: summary.json and rejected.ndjson, no delivery lists.
  public var summaryOnly: Bool
  public var threads: Int
  public var overwrite: Bool
  /// Output for `fanout merge` from a shard snapshot: lines carry their
  /// traffic line number, summary.json the shard and the traffic's digest.
  public var mergeable = false
  /// How long to wait for a writer holding the snapshot locked.
  public var busyTimeoutMilliseconds = SnapshotLoader.defaultBusyTimeoutMilliseconds
  /// Where compiled snapshots are read from and added to; nil for none.
  public var indexCache: IndexCache? = nil
  /// Called after each wave of lines: messages evaluated so far, and the
  /// fraction of the input read when its size is known.
  public var progress: (@Sendable (_ messages: Int, _ fraction: Double?) -> Void)?
  /// Told each phase as it starts: "load", "evaluate", "write".
  public var phase: (@Sendable (String) -> Void)?
  /// Refuse the run (exit 65, nothing written) when more lines than this
  /// are rejected; nil: any number (the contract's default).
  public var maxRejected: RejectionLimit?
  /// See `EvaluationEngine.ledgerChunks` (the tests' runs of one batch).
  var ledgerChunks = Engine.ledgerChunks

  public init(
    snapshot: String, messages: String, out: String, decisions: Bool = false,
    summaryOnly: Bool = false, threads: Int = 1, overwrite: Bool = false
  ) {
    self.snapshot = snapshot
    self.messages = messages
    self.out = out
    self.decisions = decisions
    self.summaryOnly = summaryOnly
    self.threads = threads
    self.overwrite = overwrite
  }
}

/// How many rejected traffic lines a run accepts: a count, or a share of
/// the lines read (`--max-rejected 100`, `--max-rejected 0.5%`).
public enum RejectionLimit: Sendable, Equatable, CustomStringConvertible {
  case lines(Int)
  case percent(Double)

  /// Parses "N" (a whole number) or "P%" (0 to 100).
  public init?(_ text: String) {
    if text.hasSuffix("%") {
      guard let p = Double(text.dropLast()), p.isFinite, (0...100).contains(p) else { return nil }
      self = .percent(p)
    } else {
      guard let n = Int(text), n >= 0 else { return nil }
      self = .lines(n)
    }
  }

  /// Whether `rejected` lines out of `lines` read go past the limit.
  public func isExceeded(rejected: Int, lines: Int) -> Bool {
    switch self {
    case .lines(let n): rejected > n
    case .percent(let p): Double(rejected) > p / 100 * Double(max(lines, 1))
    }
  }

  public var description: String {
    switch self {
    case .lines(let n): "\(n) \(n == 1 ? "line" : "lines")"
    case .percent(let p): "\(p)% of the lines"
    }
  }
}

/// The time of each phase of a run, wall-clock and CPU.
public struct Timings: Sendable {
  /// Opening, validating and indexing the snapshot.
  public var load = PhaseTime()
  /// Reading traffic and parsing it into batches.
  public var parse = PhaseTime()
  /// Evaluating pairs, building output lines and compressing them.
  public var evaluate = PhaseTime()
  /// Waiting for the output thread (which writes while the next messages are
  /// evaluated), then syncing and renaming the output files.
  public var write = PhaseTime()
  /// CPU seconds the process used over the run, every thread's, in user
  /// mode and in the kernel: against the run's seconds, how many cores
  /// were busy on average.
  public var cpuUser = 0.0
  public var cpuSystem = 0.0
}

/// The outcome of a completed run.
public struct RunReport: Sendable {
  public var counters: Counters
  public var rejected: Int
  public var gatewayNames: [String]
  public var seconds: Double
  public var timings: Timings
  /// With `--mergeable`: which shard this run evaluated, on which traffic.
  public var shard: ShardRun?
  /// The first rejected line (in line order), if any: for the run's word on it.
  public var firstRejection: Rejection?
  /// Traffic lines read (blank and rejected ones included).
  public var linesRead = 0
  /// Read lines evaluated (contract v3).
  public var reads = 0
  /// Contract v3's counts, when notification groups are on.
  public var notifications: NotificationCounters?

  public var pairsPerSecond: Double { seconds > 0 ? Double(counters.pairs) / seconds : 0 }
}

/// `fanout eval`'s chunk work: evaluate and build the output lines, on the
/// worker (`RunCompressor` compresses them); each worker keeps its evaluator (channel
/// shares outlive a wave) and its line buffers (they keep their capacity).
struct DeliveryWork: ChunkWork {
  let index: Index
  let output: Evaluator.Output
  var writesLineNumbers = false
  /// Where chunks take their line buffers from (the writer gives them back).
  let buffers: LineBuffers

  struct Worker {
    var evaluator: Evaluator
    var result: ChunkResult
  }

  var empty: EvaluatedChunk { EvaluatedChunk(gateways: 0) }
  var indexes: [Index] { [index] }
  /// Lines are written, and counts made, from what the pass found: its
  /// delivered pairs, and with `--decisions` every pair's outcome.
  func ledgerPass(side: Int) -> LedgerPass {
    output == .deliveriesAndDecisions ? .outcomes(localHours: false) : .deliveries
  }

  func makeWorker() -> Worker {
    let evaluator = Evaluator(index: index, output: output)
    evaluator.writesLineNumbers = writesLineNumbers
    return Worker(evaluator: evaluator, result: ChunkResult(gateways: index.gateways.count))
  }

  func evaluate(
    _ batch: MessageBatch, messages: Range<Int>, verdicts: [LedgerVerdicts],
    worker: inout Worker
  ) -> EvaluatedChunk {
    worker.result.removeAll()
    worker.evaluator.evaluate(
      batch, messages: messages, verdicts: verdicts[0], into: &worker.result)
    return EvaluatedChunk(taking: &worker.result, spares: buffers)
  }
}

public enum Pipeline {
  /// How long a snapshot load waits for a writer holding the file locked.
  public static let defaultBusyTimeoutMilliseconds = SnapshotLoader.defaultBusyTimeoutMilliseconds

  /// Runs `fanout eval`: the whole contract, end to end.
  public static func eval(_ options: EvalOptions) throws(PipelineError) -> RunReport {
    let clock = ContinuousClock()
    let started = clock.now
    let cpuAtStart = ProcessCPU.now()
    var timings = Timings()
    func lap(_ since: ContinuousClock.Instant) -> Double { (clock.now - since).seconds }

    let folder = try OutputFolder(
      claiming: options.out, mode: .fresh(overwrite: options.overwrite),
      inputs: [.init("--snapshot", options.snapshot), .init("--messages", options.messages)])
    defer { folder.release() }
    let reader: LineReader
    do { reader = try LineReader(path: options.messages) } catch { throw .input(error) }

    var phase = PhaseTime.start()
    options.phase?("load")
    let index: Index
    do {
      index = try SnapshotLoader.load(
        path: options.snapshot, busyTimeoutMilliseconds: options.busyTimeoutMilliseconds,
        cache: options.indexCache
      ).index
    } catch {
      throw .snapshot(error)
    }
    timings.load.add(since: phase)
    options.phase?("evaluate")
    var shard: ShardLabel?
    if options.mergeable {
      guard let label = index.settings.shardLabel.flatMap(ShardLabel.init) else {
        throw .usage(
          "--mergeable: '\(options.snapshot)' is not a shard snapshot (its settings have no "
            + "'\(ShardLabel.settingsKey)' = 'K/N'; `fanout snapshot split` writes one)")
      }
      shard = label
    }

    let writer: RunWriter
    do {
      writer = try RunWriter(
        directory: options.out, index: index, decisions: options.decisions,
        digested: options.mergeable)
    } catch { throw .output(error) }

    var counters = Counters(gateways: index.gateways.count)
    var rejected = 0
    var firstRejection: Rejection?
    let evaluation: Evaluator.Output =
      options.summaryOnly ? .counts : options.decisions ? .deliveriesAndDecisions : .deliveries
    let buffers = LineBuffers(files: index.gateways.count + 1)
    let engine = EvaluationEngine(
      index: index, threads: options.threads,
      work: DeliveryWork(
        index: index, output: evaluation, writesLineNumbers: shard != nil, buffers: buffers),
      sharedCounting: options.summaryOnly)
    engine.digestsTraffic = shard != nil
    engine.keepsUpdates = true
    engine.ledgerChunks = options.ledgerChunks
    var compressor = RunCompressor(gateways: index.gateways.count)
    var compressing = PhaseTime()
    let output = BackgroundWriter(writer, label: "fanout.output")
    try engine.run(
      reader,
      // Counting holds no lines, so a whole wave is evaluated at once.
      groupSize: options.summaryOnly ? .max : Engine.chunksInFlight,
      readFailed: PipelineError.input,
      deliver: { chunks throws(PipelineError) in
        for chunk in chunks { counters.add(chunk.counters) }
        let compressingStarted = PhaseTime.start()
        let compressed = compressor.compress(chunks)
        buffers.recycle(chunks)
        compressing.add(since: compressingStarted)
        let waiting = PhaseTime.start()
        output.submit { writer throws(OutputError) in try writer.write(compressed) }
        timings.write.add(since: waiting)  // time spent waiting for the previous write
      },
      waveDone: { batches throws(PipelineError) in
        rejected += batches.reduce(0) { $0 + $1.rejections.count }
        if firstRejection == nil {
          firstRejection = batches.lazy.compactMap(\.rejections.first).first
        }
        let updates = engine.takeUpdates()
        let compressedUpdates = updates.isEmpty ? nil : compressor.compress(updates: updates)
        output.submit { writer throws(OutputError) in
          for batch in batches { try writer.write(batch.rejections) }
          if let compressedUpdates { try writer.write(compressedUpdates) }
        }
        options.progress?(counters.messages, reader.fractionRead)
      })
    timings.parse = engine.parseTime
    timings.evaluate = engine.evaluateTime
    timings.evaluate += compressing
    options.progress?(counters.messages, 1)
    options.phase?("write")

    phase = PhaseTime.start()
    let rest = compressor.rest()
    output.submit { writer throws(OutputError) in try writer.write(rest) }
    do { try output.finish().close() } catch { throw .output(error) }
    timings.write.add(since: phase)
    let cpu = ProcessCPU.now()
    timings.cpuUser = cpu.user - cpuAtStart.user
    timings.cpuSystem = cpu.system - cpuAtStart.system
    var report = RunReport(
      counters: counters, rejected: rejected,
      gatewayNames: (0..<index.gateways.count).map { index.gateways[$0] },
      seconds: lap(started), timings: timings,
      shard: shard.map {
        ShardRun(
          label: $0, trafficLines: engine.linesRead, trafficDigest: engine.trafficDigest,
          decisions: options.decisions, summaryOnly: options.summaryOnly)
      })
    report.firstRejection = firstRejection
    report.linesRead = engine.linesRead
    report.reads = engine.reads
    report.notifications = engine.notificationCounters[0]
    let lines = engine.linesRead
    if let limit = options.maxRejected, limit.isExceeded(rejected: rejected, lines: lines) {
      // Refused whole: the run's files are discarded (never renamed).
      throw .rejectedLines(
        "\(rejected) of \(engine.linesRead) traffic lines rejected, more than --max-rejected "
          + "(\(limit)); the first, line \(firstRejection?.line ?? 0): "
          + (firstRejection?.reason ?? "?") + "; nothing was written")
    }
    do { try writer.commit { Summary.json(report, files: $0) } } catch { throw .output(error) }
    return report
  }
}
