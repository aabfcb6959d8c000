import FanoutOutput
import FanoutPipeline
import FanoutTraffic
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// `fanout stream --redis`: the stage on a message bus. One thread reads a
/// batch of entries, evaluates it and commits its output together with the
/// entries' acknowledgement, so after any crash a batch is either fully out
/// and acknowledged or not out and still pending (docs/stream.md, "Redis").
/// A lost connection drops the batch in flight (it is still pending) and is
/// retried with backoff; reading then starts again with this consumer's
/// own pending entries.
public final class BusStage: Sendable {
  private let options: StreamOptions
  private let log: StreamLog
  private let first: LoadedSnapshot
  private let reloader: SnapshotReloader
  private let stopReason = Mutex<String?>(nil)
  // Used only by the thread in `run()`.
  private nonisolated(unsafe) let bus: any MessageBus

  public init(_ options: StreamOptions, redis: RedisOptions) throws(PipelineError) {
    log = StreamLog(format: options.logFormat)
    self.options = options
    for (option, path) in [("--metrics", options.metricsPath), ("--ready-file", options.readyFile)]
    {
      if let path { try StreamStage.checkWritable(path, option: option) }
    }
    // The snapshot first: a refused one exits before anything is read or acknowledged.
    first = try LoadedSnapshot.load(
      path: options.snapshot, generation: 1,
      busyTimeoutMilliseconds: options.busyTimeoutMilliseconds)
    bus = RedisBus(redis)
    reloader = SnapshotReloader(
      current: first, log: log, watchEvery: options.watchSeconds,
      busyTimeoutMilliseconds: options.busyTimeoutMilliseconds)
  }

  /// Finishes the batch in flight, then returns from `run()`.
  public func requestStop(because reason: String) {
    let isFirst = stopReason.withLock { current -> Bool in
      defer { current = current ?? reason }
      return current == nil
    }
    if isFirst {
      log.event("stopping", "\(reason): finishing the batch in flight", ["reason": .text(reason)])
    }
  }

  public func requestReload() { reloader.reload(because: "SIGHUP") }

  private var stopping: Bool { stopReason.withLock { $0 != nil } }

  /// Connects, retrying with backoff (100 ms doubling to 5 s) until it
  /// succeeds or a stop is requested; false if stopped.
  private func connect() throws(PipelineError) -> Bool {
    var delay = 0.1
    while !stopping {
      do {
        try bus.connect()
        return true
      } catch {
        switch error {
        case .reply(let message): throw .usage("\(bus.source): \(message)")
        case .input(let message): throw .input(TrafficInputError(path: bus.source, reason: message))
        case .connection: break
        }
        log.event(
          "bus_unavailable", "\(error); retrying in \(threeDecimals(delay)) s", level: .warning,
          ["error": .text("\(error)"), "retry_seconds": .decimal(delay)])
        let until = ContinuousClock.now + .milliseconds(Int(delay * 1000))
        while ContinuousClock.now < until && !stopping { usleep(20_000) }
        delay = min(5, delay * 2)
      }
    }
    return false
  }

  public func run() throws(PipelineError) -> StreamReport {
    var snapshot = first
    let threads = options.threads
    func engine(for snapshot: LoadedSnapshot) -> EvaluationEngine<StreamWork> {
      EvaluationEngine(
        index: snapshot.index, threads: threads,
        work: StreamWork(index: snapshot.index, encoding: .numberedLines),
        throttleRetention: StreamStage.throttleRetention)
    }
    var evaluation = engine(for: snapshot)
    var metrics = StreamMetrics(metricsPath: options.metricsPath)
    var nextStatus = ContinuousClock.now + .seconds(options.statusSeconds)
    var batchNumber = 0
    log.event(
      "snapshot_loaded",
      "snapshot generation 1 (\(snapshot.path), inode \(snapshot.identity.inode)) loaded in "
        + "\(threeDecimals(snapshot.loadSeconds)) s; connecting to \(bus.source)",
      snapshot.logFields)
    guard try connect() else {
      return StreamReport(totals: metrics.total, latency: metrics.runLatency)
    }
    log.event("ready", "ready: reading \(bus.source)", ["source": .text(bus.source)])
    if let path = options.readyFile {
      do { try writeMetrics(Array("\(getpid())\n".utf8), to: path) } catch { throw .output(error) }
    }
    defer { if let path = options.readyFile { unlink(path) } }

    func reportStatus() {
      let report = metrics.closeInterval(
        queueDepth: 0, queueCapacity: 0, snapshot: snapshot, reloadsRefused: reloader.refusedCount,
        lag: bus.lag())
      log.event("status", report.line, ["metrics": .json(report.json)])
      if let path = options.metricsPath {
        do { try writeMetrics(report.file, to: path) } catch {
          log.event(
            "metrics_not_written", "cannot write the metrics: \(error); going on", level: .warning)
        }
      }
      nextStatus = .now + .seconds(options.statusSeconds)
    }

    let wake = Duration.milliseconds(min(100, Int(options.batchMilliseconds.rounded(.up))))
    while !stopping {
      if let loaded = reloader.takeReady() {
        snapshot = loaded
        let previous = evaluation
        evaluation = engine(for: loaded)
        evaluation.inheritThrottles(from: previous)
        log.event(
          "snapshot_in_use",
          "snapshot generation \(loaded.generation) in use from batch \(batchNumber + 1)",
          ["generation": .int(loaded.generation), "batch": .int(batchNumber + 1)])
      }
      if ContinuousClock.now >= nextStatus { reportStatus() }
      do throws(RedisError) {
        // A batch: what arrives within --batch-ms of its first entry, up to --batch-messages.
        var entries = try bus.read(max: options.batchLines, wait: wake)
        guard !entries.isEmpty else { continue }
        let arrival = ContinuousClock.now
        let deadline = arrival + .milliseconds(Int(options.batchMilliseconds))
        // An entry comes once per batch: with --claim-idle-ms shorter than
        // the window, XAUTOCLAIM could hand back one read earlier in it.
        var ids = Set(entries.map(\.id))
        while entries.count < options.batchLines && ContinuousClock.now < deadline && !stopping {
          let more = try bus.read(
            max: options.batchLines - entries.count, wait: min(wake, deadline - .now))
          if more.isEmpty { break }
          entries += more.filter { ids.insert($0.id).inserted }
        }
        batchNumber += 1
        let (batch, lineEntries) = evaluate(entries, number: batchNumber, snapshot, evaluation)
        try bus.commit(batch, entries: entries, lineEntries: lineEntries)
        metrics.record(batch, latency: ContinuousClock.now - arrival)
      } catch {
        switch error {
        case .connection:
          log.event(
            "bus_lost", "\(error): the batch in flight stays pending; reconnecting",
            level: .warning,
            ["error": .text("\(error)")])
          guard try connect() else { break }
        case .reply(let message):
          throw .output(OutputError(path: bus.source, reason: message))
        case .input(let message):
          throw .input(TrafficInputError(path: bus.source, reason: message))
        }
      }
    }
    reportStatus()
    let reason = stopReason.withLock { $0 } ?? "stopped"
    log.event("stopped", metrics.finalLine(reason: reason), metrics.finalFields(reason: reason))
    return StreamReport(totals: metrics.total, latency: metrics.runLatency)
  }

  /// Evaluates the entries' lines as one block numbered from 1; returns,
  /// per line number - 1, the entry it came from.
  private func evaluate(
    _ entries: [BusEntry], number: Int, _ snapshot: LoadedSnapshot,
    _ engine: EvaluationEngine<StreamWork>
  ) -> (EvaluatedBatch, [Int]) {
    var block = LineBlock()
    var lineEntries: [Int] = []
    for (e, entry) in entries.enumerated() {
      guard var line = entry.line?[...] else { continue }
      if line.last == 0x0A { line = line.dropLast() }
      if line.last == 0x0D { line = line.dropLast() }
      block.starts.append(block.bytes.count)
      if line.count > options.maxLineBytes {
        block.oversized.append(lineEntries.count)
      } else {
        block.bytes += line
      }
      block.ends.append(block.bytes.count)
      lineEntries.append(e)
    }
    block.lineLimit = options.maxLineBytes
    var batch = EvaluatedBatch.evaluate(
      [ArrivedLines(block: block, producer: nil, arrival: .now)], number: number,
      snapshot: snapshot, engine: engine)
    // Entries without a message field are rejected too (by `commit`).
    let unreadable = entries.count - lineEntries.count
    batch.lines += unreadable
    batch.rejected += unreadable
    return (batch, lineEntries)
  }
}
