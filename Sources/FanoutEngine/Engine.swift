/// FanoutEngine owns evaluating traffic in bulk, for every command that
/// does (`eval`, `whatif`, `stream`, `audit`): lines read a wave at a time
/// and parsed on every core, cut into chunks by the input alone, evaluated
/// on the worker pool (`EvaluationEngine`, with each command's
/// `ChunkWork`), the ledgers of rules across lines judged between, outputs
/// handed on in input order; and the serial queue a command hands its
/// output work to meanwhile (`BackgroundQueue`).
import FanoutIndex
import FanoutKernel
import FanoutModel
import FanoutTime
import FanoutTraffic

/// The engine's sizes, and the two steps before evaluation: parsing a
/// block of lines, and cutting the parsed messages into chunks.
public enum Engine {

  /// Lines read and parsed per wave, and per parse chunk.
  public static let waveLines = 65_536
  package static let parseChunkLines = 1_024
  /// An evaluation chunk closes at this many pairs (or at the end of a parse chunk).
  public static let chunkPairs = 65_536
  /// Evaluation chunks evaluated together; with one such group being written
  /// while the next is evaluated, this bounds memory: 8 (half a wave at
  /// most) keeps a 1M `eval`'s peak at 1.02–1.04 GB, against 1.14–1.18 with
  /// 16, in the same time (docs/performance.md).
  public static let chunksInFlight = 8
  /// With ledgers, batches are judged and evaluated in runs of about this
  /// many chunks (about 4M pairs: `EvaluationEngine.evaluate`). A wave of
  /// chat traffic at 1M users is 12 chunks or so: one run.
  public static let ledgerChunks = 64

  /// Parses a block in fixed chunks of lines, in parallel.
  package static func parse(_ block: LineBlock, index: Index, workers: Int) -> [MessageBatch] {
    let count = (block.count + parseChunkLines - 1) / parseChunkLines
    return runChunks(count: count, workers: workers, empty: MessageBatch()) { c in
      var parser = TrafficParser(index: index)
      let lines = (c * parseChunkLines)..<min((c + 1) * parseChunkLines, block.count)
      var oversized = block.oversized.drop { $0 < lines.lowerBound }.makeIterator()
      var nextOversized = oversized.next()
      parser.reserveCapacity(
        lines: lines.count, bytes: block.ends[lines.upperBound - 1] - block.starts[lines.lowerBound]
      )
      block.bytes.withUnsafeBytes { raw in
        for k in lines {
          if k == nextOversized {
            parser.reject(line: block.firstLine + k, reason: block.oversizedReason)
            nextOversized = oversized.next()
            continue
          }
          let line = UnsafeRawBufferPointer(rebasing: raw[block.starts[k]..<block.ends[k]])
          parser.parse(line, line: block.firstLine + k)
        }
      }
      return parser.finish()
    }
  }

  /// Cuts the parsed messages into evaluation chunks of about `chunkPairs`
  /// pairs. The cut depends only on the input (and `chunkPairs`), so output
  /// bytes do not depend on the number of threads.
  ///
  /// With `sharedCounting` (`--summary-only`: see `ChannelShare`), a message
  /// in a large channel whose channel and UTC minute already occur in the
  /// chunk costs its named users rather than its pairs; as counting writes
  /// no lines, a chunk may then cost 8 times as much (much more, and a wave
  /// of chat traffic would fit in one chunk, evaluated by one thread).
  package static func planChunks(
    _ batches: [MessageBatch], index: Index, chunkPairs: Int = Engine.chunkPairs,
    sharedCounting: Bool = false
  ) -> [(batch: Int, messages: Range<Int>)] {
    struct ChannelMinute: Hashable {
      var channel: Int32
      var minute: Int64
    }
    let budget = sharedCounting ? chunkPairs * 8 : chunkPairs
    var plan: [(batch: Int, messages: Range<Int>)] = []
    var seen = Set<ChannelMinute>()
    for (b, batch) in batches.enumerated() {
      var start = 0
      var cost = 0
      seen.removeAll(keepingCapacity: true)
      for m in 0..<batch.count {
        let c = Int(batch.channel[m])
        let members = index.memberCount(of: c)
        if sharedCounting && members >= Evaluator.defaultSharingThreshold {
          let key = ChannelMinute(
            channel: batch.channel[m], minute: LocalTime.floorDiv(batch.ts[m], 60_000))
          cost += seen.insert(key).inserted ? members : 1 + batch.mentions(of: m).count
        } else {
          cost += members
        }
        if cost >= budget {
          plan.append((b, start..<(m + 1)))
          start = m + 1
          cost = 0
          seen.removeAll(keepingCapacity: true)
        }
      }
      if start < batch.count { plan.append((b, start..<batch.count)) }
    }
    return plan
  }
}
