#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// Traffic input that could not be read.
public struct TrafficInputError: Error, CustomStringConvertible {
  public let path: String
  public let reason: String
  public var description: String { "cannot read messages from '\(path)': \(reason)" }
}

/// Consecutive input lines, numbered from `firstLine`, line ends removed.
public struct LineBlock: Sendable {
  public var bytes: [UInt8] = []
  /// Line k spans `bytes[starts[k]..<ends[k]]`.
  public var starts: [Int] = []
  public var ends: [Int] = []
  public var firstLine = 1

  public var count: Int { starts.count }
}

/// Reads NDJSON input in blocks of whole lines, from a file or standard input (`-`).
public final class LineReader {
  public let path: String
  private let fd: Int32
  private var pending: [UInt8] = []
  private var atEOF = false
  private var nextLine = 1
  private static let readSize = 1 << 20

  public init(path: String) throws(TrafficInputError) {
    self.path = path
    if path == "-" {
      fd = STDIN_FILENO
    } else {
      fd = open(path, O_RDONLY | O_CLOEXEC)
      guard fd >= 0 else {
        throw TrafficInputError(path: path, reason: String(cString: strerror(errno)))
      }
      var st = stat()
      if fstat(fd, &st) == 0 && (st.st_mode & S_IFMT) == S_IFDIR {
        close(fd)
        throw TrafficInputError(path: path, reason: "is a directory")
      }
    }
  }

  deinit { if fd != STDIN_FILENO { close(fd) } }

  /// The next up to `maxLines` lines, or nil at the end of the input. A last
  /// line without a line end counts; a CR before LF is dropped.
  public func next(maxLines: Int) throws(TrafficInputError) -> LineBlock? {
    var block = LineBlock()
    block.firstLine = nextLine
    var consumed = 0
    var scanFrom = 0
    while block.count < maxLines {
      if let nl = pending[scanFrom...].firstIndex(of: 0x0A) {
        addLine(&block, from: consumed, to: nl)
        consumed = nl + 1
        scanFrom = consumed
        continue
      }
      scanFrom = pending.count
      if atEOF {
        if consumed < pending.count { addLine(&block, from: consumed, to: pending.count) }
        consumed = pending.count
        break
      }
      try fill()
    }
    // Hand the consumed bytes to the block; keep the rest for next time.
    block.bytes = Array(pending[0..<consumed])
    pending.removeFirst(consumed)
    nextLine += block.count
    return block.count == 0 ? nil : block
  }

  private func addLine(_ block: inout LineBlock, from start: Int, to end: Int) {
    let trimmed = end > start && pending[end - 1] == 0x0D ? end - 1 : end
    block.starts.append(start)
    block.ends.append(trimmed)
  }

  private func fill() throws(TrafficInputError) {
    let old = pending.count
    pending.append(contentsOf: repeatElement(0, count: Self.readSize))
    while true {
      let n = pending.withUnsafeMutableBytes { read(fd, $0.baseAddress! + old, Self.readSize) }
      if n < 0 && errno == EINTR { continue }
      if n < 0 {
        pending.removeLast(Self.readSize)
        throw TrafficInputError(path: path, reason: String(cString: strerror(errno)))
      }
      pending.removeLast(Self.readSize - n)
      if n == 0 { atEOF = true }
      return
    }
  }
}
