import CLZ4

/// Decodes LZ4 frames (one or several, concatenated) with liblz4's own
/// frame decoder; nil if the bytes are not valid frames.
public func decodeLZ4Frames(_ input: [UInt8]) -> [UInt8]? {
  var context: OpaquePointer?
  guard clz4_is_error(LZ4F_createDecompressionContext(&context, UInt32(LZ4F_VERSION))) == 0 else {
    return nil
  }
  defer { LZ4F_freeDecompressionContext(context) }
  var output: [UInt8] = []
  var chunk = [UInt8](repeating: 0, count: 1 << 16)
  var position = 0
  var hint = 1
  while position < input.count {
    var srcSize = input.count - position
    var dstSize = chunk.count
    hint = input.withUnsafeBytes { src in
      chunk.withUnsafeMutableBytes { dst in
        LZ4F_decompress(
          context, dst.baseAddress, &dstSize, src.baseAddress! + position, &srcSize, nil)
      }
    }
    if clz4_is_error(hint) != 0 { return nil }
    position += srcSize
    output += chunk[0..<dstSize]
    if srcSize == 0 && dstSize == 0 { return nil }
  }
  // Drain what the decoder still holds.
  while true {
    var srcSize = 0
    var dstSize = chunk.count
    let code = chunk.withUnsafeMutableBytes { dst in
      LZ4F_decompress(context, dst.baseAddress, &dstSize, nil, &srcSize, nil)
    }
    if clz4_is_error(code) != 0 { return nil }
    output += chunk[0..<dstSize]
    if dstSize == 0 { break }
  }
  return hint == 0 ? output : nil
}
