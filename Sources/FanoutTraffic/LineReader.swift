import FanoutModel

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// Traffic input that could not be read.
public struct TrafficInputError: Error, CustomStringConvertible {
  public let path: String
  public let reason: String

  public init(path: String, reason: String) {
    self.path = path
    self.reason = reason
  }

  public var description: String { "cannot read messages from '\(path)': \(reason)" }
}

/// Consecutive input lines, numbered from `firstLine`, line ends removed.
public struct LineBlock: Sendable {
  public var bytes: [UInt8] = []
  /// Line k spans `bytes[starts[k]..<ends[k]]`.
  public var starts: [Int] = []
  public var ends: [Int] = []
  public var firstLine = 1
  /// Lines (indices into `starts`, ascending) that were longer than
  /// `lineLimit` bytes: their bytes were dropped, and they are rejected.
  public var oversized: [Int] = []
  public var lineLimit = Int.max
  /// The option that set `lineLimit`, named in the reason (nil: none).
  public var lineLimitOption: String?

  public init() {}

  public var count: Int { starts.count }

  /// Lines `range` of the block, renumbered; the bytes are shared, not copied.
  public func lines(_ range: Range<Int>) -> LineBlock {
    var part = LineBlock()
    part.bytes = bytes
    part.starts = Array(starts[range])
    part.ends = Array(ends[range])
    part.firstLine = firstLine + range.lowerBound
    part.oversized = oversized.filter(range.contains).map { $0 - range.lowerBound }
    part.lineLimit = lineLimit
    part.lineLimitOption = lineLimitOption
    return part
  }

  /// Why an oversized line is rejected.
  public var oversizedReason: String {
    "line longer than \(lineLimit) bytes\(lineLimitOption.map { " (\($0))" } ?? ""); "
      + "skipped to the next line end"
  }
}

/// Cuts a byte stream into numbered lines as it arrives: LF ends a line, a CR
/// before it is dropped. Each byte is scanned once.
///
/// A line that grows past `maxLineBytes` is not kept: its bytes are dropped
/// as they come, up to its line end, and it takes its place among the lines
/// as an empty line listed in `LineBlock.oversized` (so it is rejected with
/// its number). Memory then stays within about `maxLineBytes` plus one read,
/// whatever a producer sends.
public struct LineSplitter {
  private var pending: [UInt8] = []
  private var starts: [Int] = []
  private var ends: [Int] = []
  private var oversized: [Int] = []
  /// Where the line being read starts, and how far it has been scanned.
  private var lineStart = 0
  private var nextLine = 1
  private let maxLineBytes: Int
  /// The option that set `maxLineBytes`, for the reason (`LineBlock`).
  private let limitOption: String?
  /// The line being read is over the limit: its bytes are being dropped.
  private var dropping = false

  public init(maxLineBytes: Int = .max, limitOption: String? = nil) {
    self.maxLineBytes = maxLineBytes
    self.limitOption = limitOption
  }

  /// Complete lines buffered.
  public var completeLines: Int { starts.count }

  /// Bytes buffered, complete lines and the unfinished one.
  public var bufferedBytes: Int { pending.count }

  /// Appends bytes read from the input.
  public mutating func append(_ raw: UnsafeRawBufferPointer) {
    var raw = raw
    if dropping {
      guard let found = memchr(raw.baseAddress!, 0x0A, raw.count) else { return }
      let after = UnsafeRawPointer(found) - raw.baseAddress! + 1
      endOversizedLine()
      raw = UnsafeRawBufferPointer(rebasing: raw[after...])
    }
    var scanFrom = pending.count
    pending.append(contentsOf: raw)
    pending.withUnsafeBytes { all in
      while scanFrom < all.count,
        let found = memchr(all.baseAddress! + scanFrom, 0x0A, all.count - scanFrom)
      {
        let nl = UnsafeRawPointer(found) - all.baseAddress!
        addLine(end: nl > lineStart && all[nl - 1] == 0x0D ? nl - 1 : nl)
        lineStart = nl + 1
        scanFrom = nl + 1
      }
    }
    // (One byte more may be the CR of a line end still to come.)
    if pending.count - lineStart - 1 > maxLineBytes {
      // Over the limit with no line end yet: drop it, and what follows up to its end.
      pending.removeSubrange(lineStart...)
      dropping = true
    }
  }

  /// Adds the line from `lineStart` to `end` (line end excluded); one over
  /// the limit is kept as an empty, oversized line.
  private mutating func addLine(end: Int) {
    if end - lineStart > maxLineBytes {
      oversized.append(starts.count)
      starts.append(lineStart)
      ends.append(lineStart)
    } else {
      starts.append(lineStart)
      ends.append(end)
    }
  }

  /// The dropped line takes its place as an empty, oversized line.
  private mutating func endOversizedLine() {
    oversized.append(starts.count)
    starts.append(lineStart)
    ends.append(lineStart)
    dropping = false
  }

  /// Up to `maxLines` complete lines, or nil if there are none; with
  /// `final` (the input has ended), a last line without a line end counts.
  public mutating func take(maxLines: Int, final: Bool = false) -> LineBlock? {
    if final && dropping && starts.count < maxLines { endOversizedLine() }
    if final && lineStart < pending.count && starts.count < maxLines {
      addLine(end: pending.last == 0x0D ? pending.count - 1 : pending.count)
      lineStart = pending.count
    }
    let n = min(maxLines, starts.count)
    guard n > 0 else { return nil }
    let consumed = n == starts.count ? lineStart : starts[n]
    var block = LineBlock()
    block.firstLine = nextLine
    block.bytes = Array(pending[0..<consumed])
    block.starts = Array(starts[0..<n])
    block.ends = Array(ends[0..<n])
    block.lineLimit = maxLineBytes
    block.lineLimitOption = limitOption
    let taken = oversized.prefix { $0 < n }
    block.oversized = Array(taken)
    oversized = oversized.dropFirst(taken.count).map { $0 - n }
    // Keep the rest, rebased to the start of the buffer.
    pending.removeFirst(consumed)
    starts.removeFirst(n)
    ends.removeFirst(n)
    for k in starts.indices {
      starts[k] -= consumed
      ends[k] -= consumed
    }
    lineStart -= consumed
    nextLine += n
    return block
  }
}

/// Reads NDJSON input in blocks of whole lines, from a file or standard input (`-`).
/// A line longer than `maxLineBytes` (`maxFileLineBytes`) is rejected with
/// its number, its bytes dropped as they come.
public final class LineReader {
  public let path: String
  private let fd: Int32
  private var splitter: LineSplitter
  private var atEOF = false
  private var buffer = [UInt8](repeating: 0, count: 1 << 20)
  /// The input's size, when it is a regular file (for progress).
  public private(set) var size: Int?
  /// Bytes read so far.
  public private(set) var bytesRead = 0

  /// How far through the input reading is, 0...1, when its size is known.
  public var fractionRead: Double? {
    size.map { min(1, Double(bytesRead) / Double(max(1, $0))) }
  }

  public init(path: String, maxLineBytes: Int = maxFileLineBytes)
    throws(TrafficInputError)
  {
    self.path = path
    splitter = LineSplitter(maxLineBytes: maxLineBytes)
    guard path != "-" else {
      fd = STDIN_FILENO
      return
    }
    // Checked before `self.fd` is set: a throw after that would run
    // `deinit`, which would close the descriptor a second time (by then
    // perhaps another thread's file).
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else {
      throw TrafficInputError(path: path, reason: String(cString: strerror(errno)))
    }
    var st = stat()
    if fstat(fd, &st) == 0 && (st.st_mode & S_IFMT) == S_IFDIR {
      close(fd)
      throw TrafficInputError(path: path, reason: "is a directory")
    }
    if (st.st_mode & S_IFMT) == S_IFREG { size = Int(st.st_size) }
    self.fd = fd
  }

  deinit { if fd != STDIN_FILENO { close(fd) } }

  /// The next up to `maxLines` lines, or nil at the end of the input. A last
  /// line without a line end counts; a CR before LF is dropped.
  public func next(maxLines: Int) throws(TrafficInputError) -> LineBlock? {
    while splitter.completeLines < maxLines && !atEOF {
      let n = try readInput(fd, into: &buffer, path: path)
      bytesRead += n
      if n == 0 {
        atEOF = true
      } else {
        buffer.withUnsafeBytes { splitter.append(UnsafeRawBufferPointer(rebasing: $0[0..<n])) }
      }
    }
    return splitter.take(maxLines: maxLines, final: atEOF)
  }
}

/// One `read` into `buffer`, retried on EINTR: the byte count, 0 at the end.
public func readInput(_ fd: Int32, into buffer: inout [UInt8], path: String)
  throws(TrafficInputError) -> Int
{
  do {
    return try systemCall("read") {
      buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress!, $0.count) }
    }
  } catch {
    throw TrafficInputError(path: path, reason: error.reason)
  }
}
