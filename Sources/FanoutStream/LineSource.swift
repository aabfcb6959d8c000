import FanoutEngine
import FanoutOutput
import FanoutPipeline

/// The stage's lines from standard input or a socket (`StreamInput`, read
/// on a thread of its own into a bounded queue), its batches into rotated
/// segment files or one NDJSON stream on standard output (`BatchSink`). A
/// stop ends the reading; the lines already read are evaluated and written.
final class LineSource: StageSource {
  static let inFlight = "the lines already read"
  static let endReason = "end of input"
  private let options: StreamOptions
  private let queue: LineQueue
  private let input: StreamInput
  private let sink: any BatchSink
  let name: String

  init(_ options: StreamOptions, log: StreamLog) throws(PipelineError) {
    self.options = options
    queue = LineQueue(capacity: options.queueLines)
    input = try StreamInput(
      options.input, queue: queue, log: log, maxLineBytes: options.maxLineBytes)
    // The output folder last: a refused socket leaves nothing behind.
    switch options.destination {
    case .directory(let path):
      sink = try SegmentWriter(
        directory: path, rotateBytes: options.rotateBytes, rotateSeconds: options.rotateSeconds,
        log: log)
    case .standardOutput:
      sink = StandardOutputSink()
    }
    name =
      switch options.input {
      case .standardInput: "standard input"
      case .socket(let path): "socket \(path)"
      }
  }

  var opening: String { "reading \(name)" }
  var encoding: DeliveryEncoding { sink.encoding }

  func open() -> Bool {
    input.start()
    return true
  }

  func take(maxLines: Int, until deadline: ContinuousClock.Instant, startsBatch: Bool)
    -> SourceTake<ArrivedLines>
  {
    switch queue.take(maxLines: maxLines, waitingUntil: deadline) {
    case .timedOut: .timedOut
    case .finished: .finished
    case .lines(let lines):
      .taken(lines, lines: lines.reduce(0) { $0 + $1.block.count }, arrival: lines[0].arrival)
    }
  }

  func deliver(
    _ pieces: [ArrivedLines], number: Int, arrival: ContinuousClock.Instant,
    snapshot: LoadedSnapshot, engine: EvaluationEngine<StreamWork>
  ) throws(PipelineError) -> [WrittenBatch] {
    let batch = EvaluatedBatch.evaluate(pieces, number: number, snapshot: snapshot, engine: engine)
    do throws(OutputError) { try sink.write(batch) } catch { throw .output(error) }
    return [WrittenBatch(batch: batch, latency: .now - arrival)]
  }

  /// Each batch is written before `deliver` returns.
  func settle() -> [WrittenBatch] { [] }

  func snapshotWillChange() throws(PipelineError) {
    do { try sink.snapshotChanged() } catch { throw .output(error) }
  }

  func tick() throws(PipelineError) {
    do { try sink.tick() } catch { throw .output(error) }
  }

  var status: SourceStatus { SourceStatus(queueDepth: queue.depth, queueCapacity: queue.capacity) }

  func stop() { input.stop() }

  func abandon() {
    input.stop()
    sink.abandon()
  }

  func close() throws(PipelineError) {
    input.waitUntilFinished()
    do { try sink.finish() } catch { throw .output(error) }
  }
}
