import Dispatch

/// An LZ4 frame file whose blocks are cut at fixed offsets of its content:
/// every block but the last holds exactly `blockSize` bytes. The file's
/// bytes are then a function of its content alone — not of how the run cut
/// the work into chunks, threads or shards — so `fanout merge` writes the
/// very file a one-node `fanout eval` writes.
///
/// Content arrives in pieces (one per evaluated chunk); a block may span
/// pieces. Full blocks are compressed together, across files, in parallel.
public final class BlockedFrameFile {
  /// 1 MiB: LZ4 matches reach back 64 KiB, so larger blocks compress no
  /// better, and smaller ones spread over more threads.
  public static let blockSize = 1 << 20

  public let frame: LZ4FrameFile
  /// The content after the last full block (less than `blockSize` bytes).
  private var carry: [UInt8] = []

  public init(directory: String, name: String) throws(OutputError) {
    frame = try LZ4FrameFile(directory: directory, name: name)
  }

  public var file: PendingFile { frame.file }

  /// Appends each file's pieces, in order; the full blocks of all files are
  /// compressed in parallel, then written.
  public static func append(_ pieces: [(file: BlockedFrameFile, pieces: [[UInt8]])])
    throws(OutputError)
  {
    var owners: [BlockedFrameFile] = []
    var blocks: [ArraySlice<UInt8>] = []
    for (file, content) in pieces {
      for block in file.cut(content) {
        owners.append(file)
        blocks.append(block)
      }
    }
    let compressed = compressInParallel(blocks)
    for (owner, bytes) in zip(owners, compressed) { try owner.frame.append(blocks: bytes) }
  }

  /// Compresses the last, partial block and ends the frame (still under its
  /// partial name).
  public func close() throws(OutputError) {
    if !carry.isEmpty {
      try frame.append(
        blocks: carry.withUnsafeBytes { LZ4Frame.blocks($0, pieceSize: Self.blockSize) })
      carry = []
    }
    try frame.close()
  }

  public func discard() { frame.discard() }

  /// The full blocks `content` completes, with the carry in front; what
  /// remains becomes the new carry.
  private func cut(_ content: [[UInt8]]) -> [ArraySlice<UInt8>] {
    let size = Self.blockSize
    var full: [ArraySlice<UInt8>] = []
    for piece in content where !piece.isEmpty {
      var offset = 0
      if !carry.isEmpty {
        let take = min(size - carry.count, piece.count)
        carry += piece[..<take]
        offset = take
        if carry.count == size {
          full.append(carry[...])
          carry = []
        }
      }
      while piece.count - offset >= size {
        full.append(piece[offset..<(offset + size)])
        offset += size
      }
      if offset < piece.count {
        if carry.isEmpty { carry.reserveCapacity(size) }
        carry += piece[offset...]
      }
    }
    return full
  }

  private static func compressInParallel(_ blocks: [ArraySlice<UInt8>]) -> [[UInt8]] {
    let results = Slots(count: blocks.count)
    DispatchQueue.concurrentPerform(iterations: blocks.count) { i in
      results.slots[i] = blocks[i].withUnsafeBytes { LZ4Frame.blocks($0, pieceSize: blockSize) }
    }
    return Array(results.slots)
  }

  /// One slot per block, each written by exactly one iteration.
  private final class Slots: @unchecked Sendable {
    let slots: UnsafeMutableBufferPointer<[UInt8]>
    init(count: Int) {
      slots = .allocate(capacity: count)
      slots.initialize(repeating: [])
    }
    deinit {
      slots.deinitialize()
      slots.deallocate()
    }
  }
}
