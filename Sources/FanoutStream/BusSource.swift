import FanoutEngine
import FanoutModel
import FanoutOutput
import FanoutPipeline
import FanoutTraffic
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// `fanout stream --redis`: the stage's lines are a bus's entries. A batch
/// is evaluated and its output committed together with the entries'
/// acknowledgement, so after any crash a batch is either fully out and
/// acknowledged or not out and still pending (docs/stream.md, "Redis").
/// The server applies a batch's transaction while the stage reads and
/// evaluates the next one, so at most two batches are in flight. A lost
/// connection is retried with backoff; then the batches in flight whose
/// entries are still this consumer's pending ones are sent again as they
/// were evaluated — evaluating them again would count them twice in the
/// throttle's and the notifications' ledgers — and reading starts again
/// with this consumer's other pending entries. A stop finishes the batches
/// in flight.
final class BusSource: StageSource {
  static let inFlight = "the batches in flight"
  static let endReason = "stopped"
  private let options: StreamOptions
  private let log: StreamLog
  private let bus: any MessageBus
  private let stopping = Atomic(false)
  /// The entries of the batch being filled: an entry comes once per batch
  /// (with --claim-idle-ms shorter than the window, XAUTOCLAIM could hand
  /// back one read earlier in it).
  private var batchEntries: Set<[UInt8]> = []
  /// The batch whose transaction the server is applying.
  private var committing: Evaluated?
  /// Its entries: still pending while it is applied, so `XAUTOCLAIM` with
  /// a short --claim-idle-ms would hand them back; they are not taken again.
  private var committingEntries: Set<[UInt8]> = []
  /// Batches evaluated but not known to be written, to send again once
  /// reconnected (after a lost connection), in order.
  private var unsent: [Evaluated] = []
  /// Batches written since `deliver` or `settle` last returned.
  private var written: [WrittenBatch] = []

  /// A batch evaluated: what its transaction is made of, and when its
  /// first entry arrived.
  private struct Evaluated {
    var batch: EvaluatedBatch
    var entries: [BusEntry]
    var lineEntries: [Int]
    var arrival: ContinuousClock.Instant
  }

  init(_ options: StreamOptions, bus: any MessageBus, log: StreamLog) {
    self.options = options
    self.bus = bus
    self.log = log
  }

  var name: String { bus.source }
  var opening: String { "connecting to \(bus.source)" }
  var encoding: DeliveryEncoding { .numberedLines }

  func open() throws(PipelineError) -> Bool { try connect() }

  /// Connects, retrying with backoff (100 ms doubling to 5 s) until it
  /// succeeds or a stop is requested; false if stopped.
  private func connect() throws(PipelineError) -> Bool {
    var delay = 0.1
    while !stopping.load(ordering: .acquiring) {
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
        while ContinuousClock.now < until && !stopping.load(ordering: .acquiring) {
          usleep(20_000)
        }
        delay = min(5, delay * 2)
      }
    }
    return false
  }

  /// After a lost connection or a refused write (`current`: a batch
  /// evaluated and not sent): the stage reconnects and sends the batches in
  /// flight again (false: it is stopping; they stay pending).
  private func recover(from error: RedisError, current: Evaluated? = nil) throws(PipelineError)
    -> Bool
  {
    guard case .connection = error else { throw Self.failure(error, bus.source) }
    // The transaction in flight ended one way or the other: written, or to
    // be sent again before `current`.
    do throws(RedisError) { try awaitCommitting() } catch {
      guard case .connection = error else { throw Self.failure(error, bus.source) }
    }
    if let current { unsent.append(current) }
    log.event(
      "bus_lost", "\(error): the batches in flight stay pending; reconnecting", level: .warning,
      ["error": .text("\(error)")])
    while try connect() {
      do throws(RedisError) {
        try sendAgain()
        return true
      } catch {
        guard case .connection = error else { throw Self.failure(error, bus.source) }
        log.event(
          "bus_lost", "\(error): reconnecting", level: .warning, ["error": .text("\(error)")])
      }
    }
    return false
  }

  /// The exit a refusal or a bad input means.
  private static func failure(_ error: RedisError, _ source: String) -> PipelineError {
    switch error {
    case .connection(let message), .reply(let message):
      .output(OutputError(path: source, reason: message))
    case .input(let message): .input(TrafficInputError(path: source, reason: message))
    }
  }

  /// Sends the batches not known to be written, in order, each one whose
  /// entries are all still this consumer's pending ones (none pending: it
  /// was written before the connection was lost; some: others claimed the
  /// rest meanwhile, and those still this consumer's are read again).
  private func sendAgain() throws(RedisError) {
    while let next = unsent.first {
      switch try bus.pendingShare(of: next.entries) {
      case .all:
        try bus.send(bus.prepare(next.batch, entries: next.entries, lineEntries: next.lineEntries))
        record(next, answeredAt: try bus.awaitCommit())
      case .none:
        record(next, answeredAt: .now)
      case .some:
        break
      }
      unsent.removeFirst()
    }
  }

  func take(maxLines: Int, until deadline: ContinuousClock.Instant, startsBatch: Bool)
    throws(PipelineError) -> SourceTake<BusEntry>
  {
    if startsBatch { batchEntries = [] }
    guard !stopping.load(ordering: .acquiring) else { return .finished }
    let now = ContinuousClock.now
    guard now < deadline else { return .timedOut }
    do throws(RedisError) {
      let entries = try bus.read(max: maxLines, wait: deadline - now)
        .filter { !committingEntries.contains($0.id) && batchEntries.insert($0.id).inserted }
      return entries.isEmpty ? .timedOut : .taken(entries, lines: entries.count, arrival: .now)
    } catch {
      return try recover(from: error) ? .interrupted : .finished
    }
  }

  func deliver(
    _ entries: [BusEntry], number: Int, arrival: ContinuousClock.Instant,
    snapshot: LoadedSnapshot, engine: EvaluationEngine<StreamWork>
  ) throws(PipelineError) -> [WrittenBatch] {
    let (batch, lineEntries) = evaluate(entries, number: number, snapshot, engine)
    let current = Evaluated(
      batch: batch, entries: entries, lineEntries: lineEntries, arrival: arrival)
    do throws(RedisError) {
      let commit = try bus.prepare(batch, entries: entries, lineEntries: lineEntries)
      // The previous batch's transaction was applied meanwhile.
      try awaitCommitting()
      try bus.send(commit)
      committing = current
      committingEntries = Set(entries.map(\.id))
    } catch {
      _ = try recover(from: error, current: current)
    }
    return takeWritten()
  }

  func settle() throws(PipelineError) -> [WrittenBatch] {
    do throws(RedisError) { try awaitCommitting() } catch { _ = try recover(from: error) }
    return takeWritten()
  }

  /// Waits for the transaction in flight, if any: its batch is written, or
  /// (the error thrown) to be sent again.
  private func awaitCommitting() throws(RedisError) {
    guard let batch = committing else { return }
    committing = nil
    committingEntries = []
    do {
      record(batch, answeredAt: try bus.awaitCommit())
    } catch {
      unsent.append(batch)
      throw error
    }
  }

  /// `batch` is written; its latency ends when the server answered, not
  /// when the stage asked.
  private func record(_ batch: Evaluated, answeredAt answered: ContinuousClock.Instant) {
    written.append(WrittenBatch(batch: batch.batch, latency: answered - batch.arrival))
  }

  private func takeWritten() -> [WrittenBatch] {
    defer { written = [] }
    return written
  }

  func snapshotWillChange() {}
  func tick() {}

  var status: SourceStatus { SourceStatus(lag: bus.lag) }

  func stop() { stopping.store(true, ordering: .releasing) }

  func close() {}

  /// Nothing to remove: a transaction not applied left no trace, and its
  /// entries stay pending for a restart or another consumer.
  func abandon() {}

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
    block.lineLimitOption = StreamOptions.maxLineBytesOption
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
