import FanoutEngine
import FanoutIndex
import FanoutKernel
import FanoutModel
import FanoutOutput
import FanoutPipeline
import FanoutTime
import FanoutTraffic

/// How a batch's delivery lines are encoded for its destination; done by
/// the worker that evaluated them.
enum DeliveryEncoding: Sendable {
  /// LZ4 blocks, to be framed per gateway file.
  case lz4Blocks
  /// Plain lines, each starting with `"gateway":NAME` (standard output).
  case taggedLines
  /// Plain lines, each starting with its line number in the batch,
  /// `{"line":N,…` (a message bus: the number says which entry it answers).
  case numberedLines

  func encode(_ lines: [UInt8], gatewayJSON: [UInt8]) -> [UInt8] {
    switch self {
    case .lz4Blocks: return LZ4Frame.blocks(lines)
    case .numberedLines: return lines
    case .taggedLines:
      // `{"message":…}` becomes `{"gateway":"apns","message":…}`.
      var tagged: [UInt8] = []
      tagged.reserveCapacity(lines.count + lines.count / 8)
      lines.forEachLine { line in
        tagged += #"{"gateway":"#.utf8
        tagged += gatewayJSON
        tagged.append(UInt8(ascii: ","))
        // The line after its `{`, with its newline.
        tagged += lines[(line.lowerBound + 1)...line.upperBound]
      }
      return tagged
    }
  }
}

/// One evaluated batch, ready to be written.
struct EvaluatedBatch {
  /// Batches are numbered from 1 for the life of the process.
  let number: Int
  let snapshot: LoadedSnapshot
  /// Per gateway row of the snapshot, the encoded delivery lines (empty: none).
  let deliveries: [[UInt8]]
  /// `{"line":12,"error":"…"}` per rejected line (with `"producer"` for socket input).
  let rejectedLines: [UInt8]
  /// The same rejections, as values.
  let rejections: [Rejection]
  /// Contract v3's update lines of the batch's read lines (plain NDJSON),
  /// when the snapshot turns notification groups on.
  let updates: [UInt8]
  var lines: Int
  var rejected: Int
  let counters: Counters

  var gatewayNames: [String] {
    (0..<snapshot.index.gateways.count).map { snapshot.index.gateways[$0] }
  }

  /// The batch's record: its number, the snapshot it was evaluated against
  /// and its counts. One line, without a line end.
  func record(closedAtMillis: Int64) -> [UInt8] {
    func int(_ i: Int) -> JSONValue { .int(Int64(i)) }
    let deliveries = gatewayNames.enumerated().filter { counters.deliveries[$0.offset] > 0 }
      .map { ($0.element, int(counters.deliveries[$0.offset])) }
    let record = JSONValue.object([
      ("batch", int(number)), ("snapshot", snapshot.json), ("lines", int(lines)),
      ("messages", int(counters.messages)), ("rejected", int(rejected)),
      ("pairs", int(counters.pairs)), ("delivered", int(counters.delivered)),
      ("deliveries", .object(deliveries)),
      ("closed_at", .string(LocalTime.rfc3339UTC(millis: closedAtMillis))),
    ])
    return Array(record.rendered(.line).utf8)
  }

  /// Parses and evaluates `arrived` with `engine` (the snapshot in use's).
  static func evaluate(
    _ arrived: [ArrivedLines], number: Int, snapshot: LoadedSnapshot,
    engine: EvaluationEngine<StreamWork>
  ) -> EvaluatedBatch {
    let index = snapshot.index
    // The lines arrived in blocks (one per read, numbered per producer).
    let parsedParts = engine.parse(blocks: arrived.map(\.block))
    var parsed: [MessageBatch] = []
    var rejectedLines: [UInt8] = []
    var rejections: [Rejection] = []
    var rejected = 0
    var lines = 0
    for (part, batches) in zip(arrived, parsedParts) {
      lines += part.block.count
      for batch in batches {
        rejected += batch.rejections.count
        rejectedLines += RejectedLines.json(batch.rejections, producer: part.producer)
        rejections += batch.rejections
        parsed.append(batch)
      }
    }
    // Small chunks, so that both cores share even a small batch.
    let pairs = parsed.reduce(0) { total, batch in
      total + (0..<batch.count).reduce(0) { $0 + index.members(of: batch.channel[$1]).count }
    }
    var deliveries = [[UInt8]](repeating: [], count: index.gateways.count)
    var counters = Counters(gateways: index.gateways.count)
    engine.evaluate(
      parsed, chunkPairs: max(1_024, pairs / (4 * engine.threads)), groupSize: .max
    ) { (chunks: [StreamWork.Output]) in
      for chunk in chunks {
        counters.add(chunk.counters)
        for g in deliveries.indices { deliveries[g] += chunk.payloads[g] }
      }
    }
    return EvaluatedBatch(
      number: number, snapshot: snapshot, deliveries: deliveries, rejectedLines: rejectedLines,
      rejections: rejections, updates: engine.takeUpdates(), lines: lines, rejected: rejected,
      counters: counters)
  }

}

/// The stage's chunk work: evaluate and encode the delivery lines for the
/// destination, on the worker; each worker keeps its evaluator while the
/// snapshot is in use.
struct StreamWork: ChunkWork {
  let index: Index
  let encoding: DeliveryEncoding
  let gatewayJSON: [[UInt8]]

  init(index: Index, encoding: DeliveryEncoding) {
    self.index = index
    self.encoding = encoding
    gatewayJSON = (0..<index.gateways.count).map { JSONText.quoted(index.gateways[$0]) }
  }

  struct Output: Sendable {
    /// Per gateway row, the encoded delivery lines.
    var payloads: [[UInt8]]
    var counters: Counters
  }

  var empty: Output { Output(payloads: [], counters: Counters(gateways: 0)) }
  var indexes: [Index] { [index] }
  /// Delivery lines are written from the pass's delivered pairs.
  func ledgerPass(side: Int) -> LedgerPass { .deliveries }

  func makeWorker() -> Evaluator {
    let evaluator = Evaluator(index: index, output: .deliveries)
    evaluator.writesLineNumbers = encoding == .numberedLines
    return evaluator
  }

  func evaluate(
    _ batch: MessageBatch, messages: Range<Int>, verdicts: [LedgerVerdicts],
    worker evaluator: inout Evaluator
  ) -> Output {
    var result = ChunkResult(gateways: index.gateways.count)
    evaluator.evaluate(batch, messages: messages, verdicts: verdicts[0], into: &result)
    let payloads = result.gatewayLines.enumerated().map { g, lines in
      lines.isEmpty ? [] : encoding.encode(lines, gatewayJSON: gatewayJSON[g])
    }
    return Output(payloads: payloads, counters: result.counters)
  }
}
