import FanoutIndex
import FanoutKernel
import FanoutModel
import FanoutOutput
import FanoutTraffic

/// One evaluated chunk's lines, taken from the worker that built them;
/// the writer compresses them (see `BlockedFrameFile`).
struct EvaluatedChunk: Sendable {
  var gatewayLines: [[UInt8]]
  var decisionLines: [UInt8]
  var counters: Counters

  init(gateways: Int) {
    gatewayLines = [[UInt8]](repeating: [], count: gateways)
    decisionLines = []
    counters = Counters(gateways: gateways)
  }

  /// Moves the lines out of `result`, which starts again empty.
  init(taking result: inout ChunkResult) {
    gatewayLines = result.gatewayLines
    decisionLines = result.decisionLines
    counters = result.counters
    result = ChunkResult(gateways: gatewayLines.count)
  }
}

/// The files of one run, all pending until `commit`: gateway streams are
/// opened on their first delivery; summary.json is renamed last, so its
/// presence means the run completed.
package final class RunWriter {
  let directory: String
  let index: Index
  private var gatewayFiles: [BlockedFrameFile?]
  private let decisions: BlockedFrameFile?
  private let rejected: PendingFile

  init(directory: String, index: Index, decisions: Bool) throws(OutputError) {
    self.directory = directory
    self.index = index
    gatewayFiles = [BlockedFrameFile?](repeating: nil, count: index.gateways.count)
    self.decisions =
      decisions ? try BlockedFrameFile(directory: directory, name: "decisions.ndjson.lz4") : nil
    rejected = try PendingFile(directory: directory, name: "rejected.ndjson")
  }

  /// Appends chunks in order; their full blocks are compressed in parallel.
  func write(_ chunks: [EvaluatedChunk]) throws(OutputError) {
    var pieces: [(file: BlockedFrameFile, pieces: [[UInt8]])] = []
    for g in gatewayFiles.indices {
      let lines = chunks.map { $0.gatewayLines[g] }.filter { !$0.isEmpty }
      guard !lines.isEmpty else { continue }
      if gatewayFiles[g] == nil {
        gatewayFiles[g] = try BlockedFrameFile(
          directory: directory, name: index.gateways[g] + ".ndjson.lz4")
      }
      pieces.append((gatewayFiles[g]!, lines))
    }
    if let decisions { pieces.append((decisions, chunks.map(\.decisionLines))) }
    try BlockedFrameFile.append(pieces)
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
    try rejected.sync()
  }

  /// Writes summary.json and renames every file to its final name, the
  /// summary last: its presence means the run completed. If anything fails,
  /// no file of the run is left under its final name.
  func commit(summary: [UInt8]) throws(OutputError) {
    try close()
    let summaryFile = try PendingFile(directory: directory, name: "summary.json")
    try summaryFile.write(summary)
    try PendingFile.commit(
      together: gatewayFiles.compactMap { $0?.file }
        + [decisions?.file, rejected, summaryFile]
        .compactMap { $0 })
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
