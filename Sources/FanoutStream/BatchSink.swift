import Dispatch
import FanoutModel
import FanoutOutput
import FanoutPipeline
import FanoutTime
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// Where evaluated batches go.
protocol BatchSink: AnyObject {
  var encoding: DeliveryEncoding { get }
  /// Writes one batch, whole.
  func write(_ batch: EvaluatedBatch) throws(OutputError)
  /// The next batch is evaluated against another snapshot.
  func snapshotChanged() throws(OutputError)
  /// Called between batches and while idle, for rotation by age.
  func tick() throws(OutputError)
  /// Flushes and closes everything: the end of the stream.
  func finish() throws(OutputError)
  /// The stage failed: removes what is not published and lets the folder go.
  func abandon()
}

/// `--out -`: one NDJSON stream on standard output. Per batch, its delivery
/// lines (`{"gateway":"apns","message":…}`, grouped by gateway), then its
/// rejected lines (`{"rejected":{"line":12,"error":"…"}}`), then contract
/// v3's update lines (`{"update":{"line":9,…}}`), then its record
/// (`{"batch":17,…}`), in one write.
final class StandardOutputSink: BatchSink {
  let encoding = DeliveryEncoding.taggedLines

  func write(_ batch: EvaluatedBatch) throws(OutputError) {
    var bytes: [UInt8] = []
    for payload in batch.deliveries { bytes += payload }
    for (tag, lines) in [("rejected", batch.rejectedLines), ("update", batch.updates)] {
      lines.forEachLine { line in
        bytes += #"{"\#(tag)":"#.utf8
        bytes += lines[line]
        bytes += "}\n".utf8
      }
    }
    bytes += batch.record(closedAtMillis: WallClock.nowMillis())
    bytes.append(0x0A)
    var failure: SystemCallError?
    bytes.withUnsafeBytes {
      do throws(SystemCallError) { try writeAll(STDOUT_FILENO, $0) } catch { failure = error }
    }
    if let failure { throw OutputError(path: "standard output", failure) }
  }

  func snapshotChanged() {}
  func tick() {}
  func finish() {}
  func abandon() {}
}

/// `--out DIR`: numbered segments. Segment N holds `<gateway>-N.ndjson.lz4`
/// per gateway with deliveries (one LZ4 frame per batch), `rejected-N.ndjson`
/// if lines were rejected, `updates-N.ndjson.lz4` if read lines removed
/// notifications (contract v3; a frame per batch), and `batches-N.ndjson`,
/// one record per batch.
/// Files are written aside, then synced and renamed in the background when
/// the segment closes, the batch records last; a segment closes when a file reaches the rotation size,
/// when it is older than the rotation age, when the snapshot changes, and at
/// the end.
final class SegmentWriter: BatchSink {
  let encoding = DeliveryEncoding.lz4Blocks
  private let directory: String
  private let folder: OutputFolder
  private let rotateBytes: Int
  private let rotateSeconds: Double
  private let log: StreamLog
  /// The segment being written (or next to be opened).
  private(set) var segment: Int
  private var files: [(file: PendingFile, bytes: Int)] = []
  private var fileByName: [String: Int] = [:]
  private var openedAt: ContinuousClock.Instant?
  private let closing = DispatchQueue(label: "fanout.segment-close")
  private let closeFailure = FirstFailure()

  init(directory: String, rotateBytes: Int, rotateSeconds: Double, log: StreamLog)
    throws(PipelineError)
  {
    self.directory = directory
    self.rotateBytes = rotateBytes
    self.rotateSeconds = rotateSeconds
    self.log = log
    // Held until the stage exits: a second stage on this folder is refused
    // before it can remove this one's partial files as a crash's leftovers.
    folder = try OutputFolder(claiming: directory, mode: .resume)
    let names = try folder.entries()
    // A restart continues the numbering; files a crash left aside are removed.
    var last = 0
    for name in names {
      if OutputFolder.isPartial(name, of: { Self.segmentNumber($0) != nil }) {
        unlink(directory + "/" + name)
        log.event(
          "partial_file_removed", "removed '\(name)', an incomplete file left by an earlier run",
          ["file": .text(name)])
      } else if let number = Self.segmentNumber(name) {
        last = max(last, number)
      }
    }
    segment = last + 1
  }

  /// N of `NAME-N.ndjson` or `NAME-N.ndjson.lz4`.
  static func segmentNumber(_ name: String) -> Int? {
    var stem = Substring(name)
    if stem.hasSuffix(".lz4") { stem = stem.dropLast(4) }
    guard stem.hasSuffix(".ndjson") else { return nil }
    stem = stem.dropLast(7)
    guard let dash = stem.lastIndex(of: "-") else { return nil }
    let digits = stem[stem.index(after: dash)...]
    guard digits.count >= 6, digits.allSatisfy({ $0 >= "0" && $0 <= "9" }), let n = Int(digits)
    else { return nil }
    return n
  }

  static func fileName(_ stream: String, segment: Int, compressed: Bool) -> String {
    let digits = String(segment)
    return stream + "-" + String(repeating: "0", count: max(0, 6 - digits.count)) + digits
      + (compressed ? ".ndjson.lz4" : ".ndjson")
  }

  private func append(_ bytes: [UInt8], to stream: String, compressed: Bool) throws(OutputError) {
    let slot: Int
    if let known = fileByName[stream] {
      slot = known
    } else {
      let name = Self.fileName(stream, segment: segment, compressed: compressed)
      files.append((try PendingFile(directory: directory, name: name), 0))
      slot = files.count - 1
      fileByName[stream] = slot
    }
    try files[slot].file.write(bytes)
    files[slot].bytes += bytes.count
  }

  func write(_ batch: EvaluatedBatch) throws(OutputError) {
    if openedAt == nil { openedAt = .now }
    for (g, name) in batch.gatewayNames.enumerated() where !batch.deliveries[g].isEmpty {
      try append(
        LZ4Frame.header + batch.deliveries[g] + LZ4Frame.endMark, to: name, compressed: true)
    }
    if !batch.rejectedLines.isEmpty {
      try append(batch.rejectedLines, to: "rejected", compressed: false)
    }
    if !batch.updates.isEmpty {
      try append(
        LZ4Frame.header + LZ4Frame.blocks(batch.updates) + LZ4Frame.endMark, to: "updates",
        compressed: true)
    }
    // Renamed last when the segment closes: its presence means the segment is whole.
    try append(
      batch.record(closedAtMillis: WallClock.nowMillis()) + [0x0A], to: "batches", compressed: false
    )
    if files.contains(where: { $0.bytes >= rotateBytes }) { try closeSegment() }
  }

  func snapshotChanged() throws(OutputError) { try closeSegment() }

  func tick() throws(OutputError) {
    if let openedAt, (ContinuousClock.now - openedAt).seconds >= rotateSeconds {
      try closeSegment()
    }
  }

  func finish() throws(OutputError) {
    try closeSegment()
    closing.sync {}
    if let failure = closeFailure.error { throw failure }
    folder.release()
  }

  /// The open segment's partial files are removed (a segment still closing
  /// is published or, if that fails, removed too), then the lock.
  func abandon() {
    for (file, _) in files { file.discard() }
    files = []
    fileByName = [:]
    closing.sync {}
    folder.release()
  }

  /// Hands the segment's files to the closing queue, which syncs and renames
  /// them (the batch records last) while the next batches are evaluated.
  private func closeSegment() throws(OutputError) {
    if let failure = closeFailure.error { throw failure }
    guard !files.isEmpty else { return }
    let manifest = fileByName["batches"]!
    let failure = closeFailure
    let ordered = SegmentFiles(
      files.indices.filter { $0 != manifest }.map { files[$0].file } + [files[manifest].file])
    closing.async {
      do throws(OutputError) {
        try PendingFile.commit(together: ordered.files)
      } catch {
        failure.record(error)
      }
    }
    files = []
    fileByName = [:]
    openedAt = nil
    segment += 1
  }
}

/// A closed segment's files, owned by the closing queue from then on.
private struct SegmentFiles: @unchecked Sendable {
  let files: [PendingFile]
  init(_ files: [PendingFile]) { self.files = files }
}

/// The first error of work done in the background, reported later.
private final class FirstFailure: Sendable {
  private let first = Mutex<OutputError?>(nil)
  var error: OutputError? { first.withLock { $0 } }
  func record(_ error: OutputError) { first.withLock { $0 = $0 ?? error } }
}
