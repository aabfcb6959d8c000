import Dispatch

/// Cuts one file's content into LZ4 blocks at fixed offsets: every block
/// but the last holds exactly `blockSize` bytes. The file's bytes are then a
/// function of its content alone — not of how the run cut the work into
/// chunks, threads or shards — so `fanout merge` writes the very file a
/// one-node `fanout eval` writes.
///
/// Content arrives in pieces (one per evaluated chunk); a block may span
/// pieces. `compress` turns the full blocks of many files into frame blocks
/// in parallel.
public struct ContentBlocks: Sendable {
  /// 1 MiB: LZ4 matches reach back 64 KiB, so larger blocks compress no
  /// better, and smaller ones spread over more threads.
  public static let blockSize = 1 << 20

  /// A block's bytes: one slice of a piece, or several when it spans pieces.
  public typealias Block = [ArraySlice<UInt8>]

  /// The content after the last full block (less than `blockSize` bytes).
  /// Full blocks are slices of the pieces they came in, copied only when
  /// compressed; the carry is copied at the end of `cut`, so that it holds
  /// on to no piece (pieces are line buffers, reused once compressed).
  private var carry: Block = []
  private var carryBytes = 0

  public init() {}

  /// The full blocks `pieces` complete, carry first; the rest is kept.
  public mutating func cut(_ pieces: [[UInt8]]) -> [Block] {
    let size = Self.blockSize
    var full: [Block] = []
    for piece in pieces {
      var offset = 0
      while offset < piece.count {
        let take = min(size - carryBytes, piece.count - offset)
        carry.append(piece[offset..<(offset + take)])
        carryBytes += take
        offset += take
        if carryBytes == size {
          full.append(carry)
          carry = []
          carryBytes = 0
        }
      }
    }
    if !carry.isEmpty { carry = [ArraySlice(Self.contiguous(carry))] }
    return full
  }

  /// The last, partial block (none if the content ended on a block edge).
  public mutating func rest() -> [Block] {
    defer { (carry, carryBytes) = ([], 0) }
    return carry.isEmpty ? [] : [carry]
  }

  /// Each block as a frame block (size word + data), in parallel.
  public static func compress(_ blocks: [Block]) -> [[UInt8]] {
    let results = Slots(count: blocks.count)
    DispatchQueue.concurrentPerform(iterations: blocks.count) { i in
      let block = blocks[i]
      results.slots[i] =
        block.count == 1
        ? block[0].withUnsafeBytes { LZ4Frame.blocks($0, pieceSize: blockSize) }
        : contiguous(block).withUnsafeBytes { LZ4Frame.blocks($0, pieceSize: blockSize) }
    }
    return Array(results.slots)
  }

  private static func contiguous(_ block: Block) -> [UInt8] {
    var bytes: [UInt8] = []
    bytes.reserveCapacity(block.reduce(0) { $0 + $1.count })
    for slice in block { bytes.append(contentsOf: slice) }
    return bytes
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
