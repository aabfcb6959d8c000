import FanoutEngine
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
    // The snapshot first: a refused one exits before anything is read or acknowledged.
    first = try StageRun.prepare(options)
    bus = RedisBus(redis)
    reloader = SnapshotReloader(
      current: first, log: log, watchEvery: options.watchSeconds,
      busyTimeoutMilliseconds: options.busyTimeoutMilliseconds, cache: options.indexCache)
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
    var run = StageRun(
      options: options, log: log, first: first, reloader: reloader, encoding: .numberedLines)
    log.event(
      "snapshot_loaded",
      "snapshot generation 1 (\(first.path), inode \(first.identity.inode)) loaded in "
        + "\(threeDecimals(first.loadSeconds)) s; connecting to \(bus.source)",
      first.logFields)
    guard try connect() else {
      return StreamReport(totals: run.metrics.total, latency: run.metrics.runLatency)
    }
    try run.announceReady(reading: bus.source)
    defer { run.withdrawReady() }

    let wake = Duration.milliseconds(min(100, Int(options.batchMilliseconds.rounded(.up))))
    while !stopping {
      try run.swapIfReloaded()
      run.reportStatus(queueDepth: 0, queueCapacity: 0, lag: bus.lag)
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
        run.batchNumber += 1
        let (batch, lineEntries) = evaluate(
          entries, number: run.batchNumber, run.snapshot, run.evaluation)
        try bus.commit(batch, entries: entries, lineEntries: lineEntries)
        run.record(batch, latency: ContinuousClock.now - arrival)
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
    run.reportStatus(queueDepth: 0, queueCapacity: 0, lag: bus.lag, force: true)
    return run.finish(reason: stopReason.withLock { $0 } ?? "stopped")
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
