import FanoutEngine
import FanoutIndex
import FanoutKernel
import FanoutModel
import FanoutOutput
import FanoutTraffic
import Synchronization

/// One evaluated chunk's lines, taken from the worker that built them;
/// `RunCompressor` compresses them (see `ContentBlocks`).
struct EvaluatedChunk: Sendable {
  var gatewayLines: [[UInt8]]
  var decisionLines: [UInt8]
  var counters: Counters

  init(gateways: Int) {
    gatewayLines = [[UInt8]](repeating: [], count: gateways)
    decisionLines = []
    counters = Counters(gateways: gateways)
  }

  /// Moves the lines out of `result`, which starts again with buffers
  /// from `spares`.
  init(taking result: inout ChunkResult, spares: LineBuffers) {
    gatewayLines = result.gatewayLines
    decisionLines = result.decisionLines
    counters = result.counters
    result.removeAll()
    for g in gatewayLines.indices { result.gatewayLines[g] = spares.take(g) }
    result.decisionLines = spares.take(gatewayLines.count)
  }
}

/// Line buffers handed back once their chunk is compressed, for the workers
/// to fill again: chunks reuse warm memory instead of faulting in fresh
/// pages. Per file (each gateway, then decisions), as their sizes differ.
final class LineBuffers: Sendable {
  private let spares: Mutex<[[[UInt8]]]>

  init(files: Int) { spares = Mutex([[[UInt8]]](repeating: [], count: files)) }

  /// An empty buffer for file `f`, with the capacity of an earlier one if any.
  func take(_ f: Int) -> [UInt8] {
    var buffer = spares.withLock { $0[f].popLast() } ?? []
    buffer.removeAll(keepingCapacity: true)  // a copy if still shared: then fresh
    return buffer
  }

  /// Keeps the chunks' buffers, up to a group's worth per file: the next
  /// group takes no more (more would only hold memory).
  func recycle(_ chunks: [EvaluatedChunk]) {
    let kept = Engine.chunksInFlight
    spares.withLock { spares in
      for chunk in chunks {
        for (g, lines) in chunk.gatewayLines.enumerated() where spares[g].count < kept {
          spares[g].append(lines)
        }
        if spares[spares.count - 1].count < kept {
          spares[spares.count - 1].append(chunk.decisionLines)
        }
      }
    }
  }
}

/// Cuts a run's files into content blocks and compresses them (see
/// `ContentBlocks`), chunks in order, on the thread that runs the engine:
/// the workers' cores compress between groups of chunks while the output
/// thread writes the previous group.
struct RunCompressor {
  /// Per gateway, then the decisions file, then the updates file.
  private var files: [ContentBlocks]
  private var decisions: Int { files.count - 2 }

  init(gateways: Int) {
    files = [ContentBlocks](repeating: ContentBlocks(), count: gateways + 2)
  }

  /// The compressed full blocks the chunks complete, per file (the
  /// decisions file after the gateways').
  mutating func compress(_ chunks: [EvaluatedChunk]) -> CompressedBlocks {
    var owners: [Int] = []
    var blocks: [ContentBlocks.Block] = []
    for f in 0...decisions {
      let gateway = f < decisions
      let pieces = chunks.map { gateway ? $0.gatewayLines[f] : $0.decisionLines }
      for block in files[f].cut(pieces) {
        owners.append(f)
        blocks.append(block)
      }
    }
    return CompressedBlocks(files: owners, blocks: ContentBlocks.compress(blocks))
  }

  /// The compressed full blocks of the updates file (contract v3) that
  /// `lines` complete.
  mutating func compress(updates lines: [UInt8]) -> CompressedBlocks {
    let blocks = files[files.count - 1].cut([lines])
    return CompressedBlocks(
      files: [Int](repeating: files.count - 1, count: blocks.count),
      blocks: ContentBlocks.compress(blocks))
  }

  /// Every file's last, partial block.
  mutating func rest() -> CompressedBlocks {
    var owners: [Int] = []
    var blocks: [ContentBlocks.Block] = []
    for f in files.indices {
      for block in files[f].rest() {
        owners.append(f)
        blocks.append(block)
      }
    }
    return CompressedBlocks(files: owners, blocks: ContentBlocks.compress(blocks))
  }
}

/// Frame blocks, each with the file it belongs to (a gateway's number, the
/// gateway count for the decisions file, one more for the updates file),
/// in file order.
struct CompressedBlocks: Sendable {
  var files: [Int]
  var blocks: [[UInt8]]
}

/// The files of one run, all pending until `commit`: gateway streams are
/// opened on their first block; summary.json is renamed last, so its
/// presence means the run completed.
package final class RunWriter {
  let directory: String
  let index: Index
  private var gatewayFiles: [LZ4FrameFile?]
  private let decisions: LZ4FrameFile?
  /// Contract v3's update lines, when notification groups are on.
  private let updates: LZ4FrameFile?
  private let rejected: PendingFile
  /// Whether each file's size and digest are kept, for summary.json (`--mergeable`).
  private let digested: Bool

  init(directory: String, index: Index, decisions: Bool, digested: Bool = false)
    throws(OutputError)
  {
    self.directory = directory
    self.index = index
    self.digested = digested
    gatewayFiles = [LZ4FrameFile?](repeating: nil, count: index.gateways.count)
    self.decisions =
      decisions
      ? try LZ4FrameFile(directory: directory, name: "decisions.ndjson.lz4", digested: digested)
      : nil
    updates =
      index.settings.notificationGroups != nil
      ? try LZ4FrameFile(directory: directory, name: "updates.ndjson.lz4", digested: digested)
      : nil
    rejected = try PendingFile(directory: directory, name: "rejected.ndjson", digested: digested)
  }

  func write(_ compressed: CompressedBlocks) throws(OutputError) {
    for (g, blocks) in zip(compressed.files, compressed.blocks) {
      guard g < gatewayFiles.count else {
        try (g == gatewayFiles.count ? decisions : updates)?.append(blocks: blocks)
        continue
      }
      if gatewayFiles[g] == nil {
        gatewayFiles[g] = try LZ4FrameFile(
          directory: directory, name: index.gateways[g] + ".ndjson.lz4", digested: digested)
      }
      try gatewayFiles[g]!.append(blocks: blocks)
    }
  }

  func write(_ rejections: [Rejection]) throws(OutputError) {
    guard !rejections.isEmpty else { return }
    try rejected.write(RejectedLines.json(rejections))
  }

  /// Completes and syncs every data file (the slow part of finishing a run),
  /// still under their partial names.
  func close() throws(OutputError) {
    for file in gatewayFiles { try file?.close() }
    try decisions?.close()
    try updates?.close()
    try rejected.sync()
  }

  /// Writes summary.json, made by `summary` from the files written (their
  /// names, sizes and digests when `digested`, in name order), and renames
  /// every file to its final name, the summary last: its presence means the
  /// run completed. If anything fails, no file of the run is left under its
  /// final name.
  func commit(summary: ([WrittenFile]) -> [UInt8]) throws(OutputError) {
    try close()
    let files =
      gatewayFiles.compactMap { $0?.file }
      + [decisions?.file, updates?.file, rejected].compactMap { $0 }
    let written = files.compactMap { file in
      file.contents.map {
        WrittenFile(
          name: String(file.path.dropFirst(directory.count + 1)), bytes: $0.bytes, digest: $0.digest
        )
      }
    }.sorted { $0.name.utf8.lexicographicallyPrecedes($1.name.utf8) }
    let summaryFile = try PendingFile(directory: directory, name: "summary.json")
    try summaryFile.write(summary(written))
    try PendingFile.commit(together: files + [summaryFile])
  }
}

/// The lines of `rejected.ndjson` (and of `fanout stream`'s rejected output).
public enum RejectedLines {
  /// `{"line":12,"error":"…"}` per rejected line; with a producer (`fanout
  /// stream`'s socket connections), `{"producer":3,"line":12,"error":"…"}`.
  public static func json(_ rejections: [Rejection], producer: Int? = nil) -> [UInt8] {
    let prefix = producer.map { #"{"producer":\#($0),"line":"# } ?? #"{"line":"#
    var bytes: [UInt8] = []
    for r in rejections {
      bytes += prefix.utf8
      bytes += #"\#(r.line),"error":"#.utf8
      bytes += JSONText.quoted(r.reason)
      bytes += "}\n".utf8
    }
    return bytes
  }
}

/// Writes a run's output while the workers evaluate the next group.
typealias BackgroundWriter = BackgroundQueue<RunWriter, OutputError>
