import CLZ4

/// The LZ4 frame format, produced as one frame per file whose blocks are
/// compressed independently, so that workers compress their own chunks in
/// parallel and the writer only concatenates: the bytes do not depend on the
/// number of threads, and any LZ4 frame reader (`lz4 -d`) reads the file.
public enum LZ4Frame {
  /// Largest block the frame header announces (4 MiB).
  public static let maxBlockSize = 4 << 20

  /// The frame header for independent 4 MiB blocks with no checksums and no
  /// content size, as liblz4 writes it.
  public static let header: [UInt8] = {
    var prefs = LZ4F_preferences_t()
    prefs.frameInfo.blockSizeID = LZ4F_max4MB
    prefs.frameInfo.blockMode = LZ4F_blockIndependent
    var context: OpaquePointer?
    precondition(clz4_is_error(LZ4F_createCompressionContext(&context, UInt32(LZ4F_VERSION))) == 0)
    defer { LZ4F_freeCompressionContext(context) }
    var out = [UInt8](repeating: 0, count: Int(LZ4F_HEADER_SIZE_MAX))
    let n = out.withUnsafeMutableBytes {
      LZ4F_compressBegin(context, $0.baseAddress, $0.count, &prefs)
    }
    precondition(clz4_is_error(n) == 0)
    return Array(out[0..<n])
  }()

  /// LZ4's acceleration (1 is `LZ4_compress_default`). Delivery lines hold
  /// random device tokens and compress only ~2.3×; at 4, compressing takes
  /// about a fifth less time for about 2% more bytes (1M `eval`: 9% less
  /// user CPU; docs/performance.md). Any LZ4 reader reads either.
  static let acceleration: Int32 = 4

  /// The end mark that closes a frame.
  public static let endMark: [UInt8] = [0, 0, 0, 0]

  /// `bytes` as a sequence of complete frame blocks (size word + data), in
  /// pieces of at most `maxBlockSize`; empty input gives no blocks.
  ///
  /// - Complexity: O(n); allocates the result once, at its largest possible
  ///   size (nothing is zero-filled or copied twice).
  public static func blocks(_ bytes: [UInt8]) -> [UInt8] {
    bytes.withUnsafeBytes { blocks($0) }
  }

  /// `bytes` as complete frame blocks, as `blocks(_:)` for an array.
  public static func blocks(_ bytes: UnsafeRawBufferPointer) -> [UInt8] {
    blocks(bytes, pieceSize: maxBlockSize)
  }

  static func blocks(_ src: UnsafeRawBufferPointer, pieceSize: Int) -> [UInt8] {
    guard !src.isEmpty else { return [] }
    let pieces = stride(from: 0, to: src.count, by: pieceSize).map {
      min(pieceSize, src.count - $0)
    }
    let capacity = pieces.reduce(0) { $0 + 4 + Int(LZ4_compressBound(Int32($1))) }
    return [UInt8](unsafeUninitializedCapacity: capacity) { out, count in
      var start = 0
      count = 0
      for n in pieces {
        let headerAt = count
        let body = out.baseAddress! + headerAt + 4
        let written = Int(
          LZ4_compress_fast(
            (src.baseAddress! + start).assumingMemoryBound(to: CChar.self),
            UnsafeMutableRawPointer(body).assumingMemoryBound(to: CChar.self), Int32(n),
            LZ4_compressBound(Int32(n)), acceleration))
        var word: UInt32
        if written > 0 && written < n {
          word = UInt32(written)
          count += 4 + written
        } else {
          // Incompressible: stored as is, flagged by the high bit.
          word = UInt32(n) | 0x8000_0000
          UnsafeMutableRawPointer(body).copyMemory(from: src.baseAddress! + start, byteCount: n)
          count += 4 + n
        }
        for k in 0..<4 { out[headerAt + k] = UInt8(truncatingIfNeeded: word >> (8 * UInt32(k))) }
        start += n
      }
    }
  }
}

/// A `.lz4` file holding one frame: header now, blocks as they come, end
/// mark on commit.
public final class LZ4FrameFile {
  public let file: PendingFile
  private var closed = false

  public init(directory: String, name: String, digested: Bool = false) throws(OutputError) {
    file = try PendingFile(
      directory: directory, name: name, pastPageCache: true, digested: digested)
    try file.write(LZ4Frame.header)
  }

  /// Appends blocks made by `LZ4Frame.blocks`.
  public func append(blocks: [UInt8]) throws(OutputError) {
    if !blocks.isEmpty { try file.write(blocks) }
  }

  /// Writes the end mark: the frame is complete (still under its partial name).
  public func close() throws(OutputError) {
    guard !closed else { return }
    try file.write(LZ4Frame.endMark)
    try file.sync()
    closed = true
  }

  public func commit() throws(OutputError) {
    try close()
    try file.commit()
  }

  public func discard() { file.discard() }
}
