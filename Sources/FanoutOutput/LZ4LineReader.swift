import CLZ4
import FanoutModel

#if canImport(Glibc)
  import Glibc
#endif

/// Reads the lines of an `.ndjson.lz4` file (one or more LZ4 frames), a
/// bounded piece at a time: `fanout merge` walks several at once. With
/// `plainTextAccepted`, a file that does not open with an LZ4 frame's magic
/// number is read as plain text (`fanout audit`'s sent logs may be either).
public final class LZ4LineReader {
  public let path: String
  private let plainTextAccepted: Bool
  private let maxLineBytes: Int
  /// Whether the file is plain text, once its first bytes were read.
  private var isPlain: Bool? = nil
  private let fd: Int32
  private var context: OpaquePointer?
  private var input = [UInt8](repeating: 0, count: 1 << 20)
  private var inputStart = 0
  private var inputEnd = 0
  private var endOfFile = false
  /// What the file must be, as its writer recorded it (`fanout merge`):
  /// checked against the bytes as they are read, so that a file changed
  /// after an earlier check is not used.
  private var expected: (bytes: Int, digest: UInt64, stream: XXH64.Stream)?
  /// Bytes of the file read so far (compressed), for progress.
  public private(set) var bytesRead = 0
  /// Decompressed bytes not yet handed out, from `start`.
  private var text: [UInt8] = []
  private var start = 0
  private var chunk = [UInt8](repeating: 0, count: 1 << 20)
  /// Whether the bytes read so far end a frame (an empty file ends none).
  private var frameComplete = false

  /// - Parameter expecting: the file's size and XXH64 digest, when it must
  ///   be a regular file (not a link, FIFO or device) with exactly those
  ///   bytes: its end is then refused where they differ.
  public init(
    path: String, plainTextAccepted: Bool = false, maxLineBytes: Int = maxFileLineBytes,
    expecting: (bytes: Int, digest: UInt64)? = nil
  ) throws(OutputError) {
    self.path = path
    self.plainTextAccepted = plainTextAccepted
    self.maxLineBytes = maxLineBytes
    // Expected bytes come from a file of our own: never follow a link, never
    // wait on a FIFO's writer.
    let flags =
      expecting == nil ? O_RDONLY | O_CLOEXEC : O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK
    do { fd = try systemCall("open") { open(path, flags) } } catch {
      throw OutputError(path: path, error)
    }
    if let expecting {
      var info = stat()
      guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG else {
        close(fd)
        throw OutputError(path: path, reason: "not a regular file")
      }
      expected = (expecting.bytes, expecting.digest, XXH64.Stream())
    }
    guard clz4_is_error(LZ4F_createDecompressionContext(&context, UInt32(LZ4F_VERSION))) == 0
    else {
      // (`deinit` closes `fd`: it runs when an initializer throws this late.)
      throw OutputError(path: path, reason: "cannot create an LZ4 decompression context")
    }
  }

  /// Fails once the partial line at `start` is longer than `maxLineBytes`
  /// (`maxFileLineBytes` unless the caller says).
  private func checkPartialLine() throws(OutputError) {
    guard text.count - start > maxLineBytes else { return }
    throw OutputError(path: path, reason: "a line longer than \(maxLineBytes) bytes (no line end)")
  }

  /// The first bytes of an LZ4 frame (0x184D2204, little-endian).
  static let frameMagic: [UInt8] = [0x04, 0x22, 0x4D, 0x18]

  deinit {
    LZ4F_freeDecompressionContext(context)
    close(fd)
  }

  /// The next line, without its newline, valid until the next call; nil at
  /// the end. A last line without a newline is returned as a line.
  public func nextLine() throws(OutputError) -> ArraySlice<UInt8>? {
    while true {
      if let newline = text.newline(from: start) {
        defer { start = newline + 1 }
        return text[start..<newline]
      }
      // Keep the partial line, then decompress more behind it.
      try checkPartialLine()
      text.removeSubrange(0..<start)
      start = 0
      guard try decompressMore() else {
        guard !text.isEmpty else { return nil }
        start = text.count
        return text[0..<text.count]
      }
    }
  }

  /// The next lines as one block, each followed by a newline (a last line
  /// without one is given one), with each line's end (the offset of its
  /// newline in the block): at most `maxLines` lines, stopping after the
  /// line that takes the block to `maxBytes`, and where the bytes
  /// decompressed so far end; nil at the end of the file. A block is not a
  /// copy: it shares the buffer the file was decompressed into (a new one
  /// is started for what follows, so a block stays valid while it is held).
  public func nextBlock(maxLines: Int, maxBytes: Int = .max) throws(OutputError) -> (
    bytes: ArraySlice<UInt8>, ends: [Int]
  )? {
    while true {
      let blockStart = start
      var ends: [Int] = []
      text.withUnsafeBytes { raw in
        guard let base = raw.baseAddress else { return }
        var p = start
        while ends.count < maxLines, p < raw.count,
          let hit = memchr(base + p, 0x0A, raw.count - p)
        {
          let newline = base.distance(to: UnsafeRawPointer(hit))
          ends.append(newline - blockStart)
          p = newline + 1
          if p - blockStart >= maxBytes { break }
        }
        start = p
      }
      if !ends.isEmpty { return (text[blockStart..<start], ends) }
      // Only part of a line is left: into a new buffer (the blocks handed
      // out keep the old one), the rest of the file decompressed behind it.
      // (At least twice the partial line: a long one is copied a few times, not once a chunk.)
      try checkPartialLine()
      guard try refill(atLeast: max(maxBytes == .max ? 1 : maxBytes, 2 * (text.count - start)))
      else {
        guard !text.isEmpty else { return nil }
        text.append(0x0A)
        start = text.count
        return (text[0..<text.count], [text.count - 1])
      }
    }
  }

  /// Starts a new `text` with what is left of the old one, then
  /// decompresses behind it, straight into it, until it holds `wanted`
  /// bytes or the file ends; false when nothing more was decompressed.
  private func refill(atLeast wanted: Int) throws(OutputError) -> Bool {
    let leftover = text[start...]
    let capacity = max(wanted, leftover.count) + chunk.count
    var failure: OutputError? = nil
    var more = false
    text = [UInt8](unsafeUninitializedCapacity: capacity) { buffer, count in
      let raw = UnsafeMutableRawBufferPointer(buffer)
      leftover.withUnsafeBytes { raw.copyMemory(from: $0) }
      count = leftover.count
      while count < wanted || !more {
        do throws(OutputError) {
          guard
            let produced = try decompress(
              into: UnsafeMutableRawBufferPointer(rebasing: raw[count...]))
          else { return }
          count += produced
          more = true
        } catch {
          failure = error
          return
        }
        if count + chunk.count > capacity { return }
      }
    }
    start = 0
    if let failure { throw failure }
    return more
  }

  /// Appends decompressed bytes to `text`; false at the end of the file.
  private func decompressMore() throws(OutputError) -> Bool {
    let result = chunk.withUnsafeMutableBytes { out in
      Result { () throws(OutputError) in try decompress(into: out) }
    }
    guard let produced = try result.get() else { return false }
    text += chunk[0..<produced]
    return true
  }

  /// Decompresses into `out` (at least a byte, at most its size); how many
  /// bytes, nil at the end of the file.
  private func decompress(into out: UnsafeMutableRawBufferPointer) throws(OutputError) -> Int? {
    while true {
      if inputStart == inputEnd {
        if endOfFile { return nil }
        let got: Int
        do {
          got = try systemCall("read") {
            input.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
          }
        } catch { throw OutputError(path: path, error) }
        inputStart = 0
        inputEnd = got
        bytesRead += got
        if expected != nil {
          input.withUnsafeBytes {
            expected!.stream.update(UnsafeRawBufferPointer(rebasing: $0[0..<got]))
          }
        }
        if got == 0 {
          endOfFile = true
          if let expected,
            expected.bytes != bytesRead || expected.digest != expected.stream.finish()
          {
            throw OutputError(
              path: path, reason: "changed since it was checked (size or XXH64 digest differs)")
          }
          // liblz4's hint is 0 only where a frame ended.
          guard frameComplete || isPlain == true || (plainTextAccepted && bytesRead == 0) else {
            throw OutputError(path: path, reason: "truncated LZ4 frame")
          }
          return nil
        }
        if isPlain == nil {
          isPlain = plainTextAccepted && !input[0..<inputEnd].starts(with: Self.frameMagic)
        }
      }
      if isPlain == true {
        let n = min(out.count, inputEnd - inputStart)
        input.withUnsafeBytes {
          out.baseAddress!.copyMemory(from: $0.baseAddress! + inputStart, byteCount: n)
        }
        inputStart += n
        return n
      }
      var produced = out.count
      var consumed = inputEnd - inputStart
      let hint = input.withUnsafeBytes { src in
        LZ4F_decompress(
          context, out.baseAddress, &produced, src.baseAddress! + inputStart, &consumed, nil)
      }
      guard clz4_is_error(hint) == 0 else {
        throw OutputError(
          path: path, reason: "not an LZ4 frame: \(String(cString: LZ4F_getErrorName(hint)))")
      }
      frameComplete = hint == 0
      inputStart += consumed
      if produced > 0 { return produced }
    }
  }
}
