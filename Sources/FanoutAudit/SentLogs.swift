import Dispatch
import FanoutIndex
import FanoutKernel
import FanoutOutput

/// A sent log's line that could not be read: skipped, and reported with
/// its file and line number.
struct UnreadableLine {
  var file: Int32
  var line: Int
  var reason: String
}

/// One sent log, read a block of lines at a time and parsed on every core:
/// its lines' pushes in order.
final class ParsedLogFile {
  /// One line, parsed.
  enum Line {
    case blank
    case unreadable(String)
    /// Pushes of a message the traffic has.
    case pushes(ArraySlice<SentPush>)
    /// Pushes of a message no traffic line has (with the id the log gave).
    case unknown(ArraySlice<SentPush>)
  }

  /// A chunk of lines, parsed and resolved: what each line is, where its
  /// pushes end, and the reasons of the unreadable ones, in order.
  struct Chunk {
    enum Kind { case blank, unreadable, pushes, unknown }
    var kinds: [Kind] = []
    var pushEnds: [Int] = []
    var pushes: [SentPush] = []
    var reasons: [String] = []
  }

  let file: Int32
  private let reader: LZ4LineReader
  private let index: Index
  private let messages: MessageLines
  private let names: PushNames
  private let threads: Int
  private var block: [Chunk] = []
  /// The next line: its chunk, its place there, the next unreadable reason.
  private var chunk = 0
  private var next = 0
  private var reason = 0
  /// The number of the next line.
  private var number = 1

  /// A block: this many lines, or the line that takes it to `blockBytes`
  /// (a block of gateway-file lines holds about 4,000 lines, one of
  /// push-per-line lines all 16,384), so that it stays in the cache.
  static let blockLines = 16_384
  static let blockBytes = 2 << 20
  static let chunkLines = 1_024

  init(
    path: String, file: Int32, index: Index, messages: MessageLines, names: PushNames,
    threads: Int
  ) throws(OutputError) {
    reader = try LZ4LineReader(path: path, plainTextAccepted: true)
    self.file = file
    self.index = index
    self.messages = messages
    self.names = names
    self.threads = threads
  }

  /// The blocks after this one, read and parsed in order on a queue of
  /// this file's while the current one is matched (a block of short lines
  /// may hold the pushes of a few messages only); the reader and
  /// `readerLine` belong to that queue.
  private var ahead: [NextBlock] = []
  private let queue = DispatchQueue(label: "fanout.audit.sent-log")
  private var readerLine = 1
  static let blocksAhead = 3

  private final class NextBlock: @unchecked Sendable {
    var result: Result<[Chunk], OutputError> = .success([])
    let done = DispatchSemaphore(value: 0)
  }

  /// A value handed to another thread that touches it alone meanwhile.
  private struct Handed<T>: @unchecked Sendable { let value: T }

  /// Asks the queue for one more block.
  private func readAhead() {
    let job = NextBlock()
    let me = Handed(value: self)
    ahead.append(job)
    queue.async {
      job.result = Result { () throws(OutputError) in
        let block = try me.value.readBlock(first: me.value.readerLine)
        me.value.readerLine += block.reduce(0) { $0 + $1.kinds.count }
        return block
      }
      job.done.signal()
    }
  }

  /// The next line, its number and how many lines it stands for; nil at
  /// the end of the file. Consecutive lines whose pushes belong to one
  /// message line (the same id, placed at the same line) come as one: a
  /// log with a push per line is handed out a message at a time.
  func nextLine() throws(OutputError) -> (number: Int, lines: Int, line: Line)? {
    while chunk == block.count || next == block[chunk].kinds.count {
      if chunk < block.count {
        chunk += 1
        next = 0
        reason = 0
        continue
      }
      while ahead.count < Self.blocksAhead { readAhead() }
      let job = ahead.removeFirst()
      job.done.wait()
      block = try job.result.get()
      readAhead()
      chunk = 0
      next = 0
      reason = 0
      if block.isEmpty { return nil }
    }
    // (Through `block[chunk]` each time: a copy of the chunk would retain
    // its four arrays.)
    let start = next == 0 ? 0 : block[chunk].pushEnds[next - 1]
    var end = next + 1
    let line: Line
    switch block[chunk].kinds[next] {
    case .blank: line = .blank
    case .unreadable:
      line = .unreadable(block[chunk].reasons[reason])
      reason += 1
    case .pushes:
      if start < block[chunk].pushEnds[next] {
        let (hash, first) = (block[chunk].pushes[start].idHash, block[chunk].pushes[start].line)
        while end < block[chunk].kinds.count && block[chunk].kinds[end] == .pushes {
          let k = block[chunk].pushEnds[end - 1]
          guard k < block[chunk].pushEnds[end], block[chunk].pushes[k].idHash == hash,
            block[chunk].pushes[k].line == first
          else { break }
          end += 1
        }
      }
      line = .pushes(block[chunk].pushes[start..<block[chunk].pushEnds[end - 1]])
    case .unknown: line = .unknown(block[chunk].pushes[start..<block[chunk].pushEnds[next]])
    }
    defer {
      number += end - next
      next = end
    }
    return (number, end - next, line)
  }

  /// Waits for blocks still being read: the reader is not freed under them.
  deinit { for job in ahead { job.done.wait() } }

  /// Reads a block of lines (see `blockLines`), numbered from `first`, and parses
  /// them in chunks, in parallel.
  private func readBlock(first: Int) throws(OutputError) -> [Chunk] {
    let (bytes, ends) =
      try reader.nextBlock(maxLines: Self.blockLines, maxBytes: Self.blockBytes) ?? ([], [])
    let count = ends.count
    let chunks = (count + Self.chunkLines - 1) / Self.chunkLines
    let (index, messages, names, file) = (index, messages, names, file)
    let (text, lineEnds) = (bytes, ends)
    return runChunks(count: chunks, workers: threads, empty: Chunk()) { c in
      text.withUnsafeBytes { raw in
        Self.parse(
          raw, ends: lineEnds, lines: (c * Self.chunkLines)..<min((c + 1) * Self.chunkLines, count),
          first: first, file: file, index: index, messages: messages, names: names)
      }
    }
  }

  /// Parses and resolves `lines` of `text`, whose lines end at `ends` (line
  /// `k` being number `first + k`).
  private static func parse(
    _ text: UnsafeRawBufferPointer, ends: [Int], lines: Range<Int>, first: Int, file: Int32,
    index: Index,
    messages: MessageLines, names: PushNames
  ) -> Chunk {
    var parser = SentLogParser(index: index)
    var batch = PushBatch()
    var parsed = Chunk()
    /// The lines with pushes (their places in `parsed`) and each one's
    /// message id among `ids` (quoted) and `hashes`, where an id repeated on
    /// consecutive lines (a log with a push per line) is kept once and
    /// looked up once.
    var withPushes: [Int] = []
    var idOfLine: [Int32] = []
    var ids = BytePool.Builder()
    var hashes: [UInt64] = []
    for k in lines {
      let start = k == 0 ? 0 : ends[k - 1] + 1
      var end = ends[k]
      if end > start && text[end - 1] == 0x0D { end -= 1 }
      let line = UnsafeRawBufferPointer(rebasing: text[start..<end])
      let kind: Chunk.Kind
      if line.allSatisfy({ $0 == 0x20 || $0 == 0x09 }) {
        kind = .blank
      } else {
        let mark = batch.count
        do {
          try parser.parse(line, file: file, number: first + k, into: &batch)
          kind = .pushes
          if mark < batch.count {
            withPushes.append(parsed.kinds.count)
            let hash = batch.pushes[mark].idHash
            if hashes.last != hash {
              parser.messageQuoted.withUnsafeBytes { ids.append($0) }
              hashes.append(hash)
            }
            idOfLine.append(Int32(hashes.count - 1))
          }
        } catch {
          parsed.reasons.append(error.reason)
          kind = .unreadable
        }
      }
      parsed.kinds.append(kind)
      parsed.pushEnds.append(batch.count)
    }
    batch.resolve(against: index, keepingNames: names)
    parsed.pushes = batch.pushes
    var firstLines: [Int] = []
    messages.firstLines(hashes, into: &firstLines)
    for (n, l) in withPushes.enumerated() {
      let pushes = (l == 0 ? 0 : parsed.pushEnds[l - 1])..<parsed.pushEnds[l]
      let id = Int(idOfLine[n])
      if firstLines[id] >= 0 {
        for k in pushes { parsed.pushes[k].line = firstLines[id] }
        continue
      }
      parsed.kinds[l] = .unknown
      for k in pushes {
        let message = ids.withBytes(id) { Array($0) }
        if parsed.pushes[k].names >= 0 {
          names.update(parsed.pushes[k].names) { $0.message = message }
        } else {
          parsed.pushes[k].names = names.add(SentPush.Names(message: message))
        }
      }
    }
    return parsed
  }
}

/// The pushes of the sent logs, handed out traffic line by traffic line.
///
/// A log in traffic order (as Fanout's own gateway files are, and a log
/// per gateway written as pushes go out, deferred ones aside) is read as
/// the traffic is evaluated, the files side by side, holding only the
/// pushes of the line at hand: memory does not grow with the log. When a
/// push turns up behind the line at hand (its message's lines are all
/// done), the log is not in traffic order: `take` throws `.outOfOrder`, and
/// the audit starts again with `SentLogs(sortedFrom:)`, which reads every
/// push first (64 bytes each) and sorts them by traffic line.
final class SentLogs {
  private let paths: [String]
  private let messages: MessageLines
  /// What pushes named that the index does not have.
  let names = PushNames()
  /// Streaming: per file, its lines and the pushes of its next line.
  private var files: [ParsedLogFile] = []
  private var heads: [ArraySlice<SentPush>] = []
  /// Sorted: every push in log order, their order by traffic line, and the
  /// place in that order of the next to hand out.
  private var sorted: (pushes: [SentPush], order: [Int])? = nil
  private var cursor = 0

  /// Pushes naming a message that no traffic line has.
  private(set) var unknown: [SentPush] = []
  private(set) var unreadable: [UnreadableLine] = []
  private(set) var logLines = 0
  private(set) var pushesRead = 0

  /// Opens the logs to read them in traffic order.
  init(paths: [String], messages: MessageLines, index: Index, threads: Int) throws(AuditError) {
    self.paths = paths
    self.messages = messages
    for (f, path) in paths.enumerated() {
      do {
        files.append(
          try ParsedLogFile(
            path: path, file: Int32(f), index: index, messages: messages, names: names,
            threads: threads))
      } catch { throw .log(error) }
      heads.append([])
    }
    for f in paths.indices { _ = try advance(f, frontier: 0) }
  }

  /// Reads every push of the logs, then sorts them by traffic line (each
  /// placed at its message id's first line).
  init(sortedFrom paths: [String], messages: MessageLines, index: Index, threads: Int)
    throws(AuditError)
  {
    self.paths = paths
    self.messages = messages
    var all: [SentPush] = []
    for (f, path) in paths.enumerated() {
      do {
        let file = try ParsedLogFile(
          path: path, file: Int32(f), index: index, messages: messages, names: names,
          threads: threads)
        while let (number, lines, line) = try file.nextLine() {
          // (Parsed with their message id's first line.)
          if let pushes = known(line, file: Int32(f), number: number, lines: lines) {
            all += pushes
          }
        }
      } catch { throw .log(error) }
    }
    // A counting sort of the pushes by line: stable, so a line's pushes
    // stay in log order (file, then line), as they were read.
    var starts = [Int](repeating: 0, count: (all.map(\.line).max() ?? 0) + 2)
    for push in all { starts[push.line + 1] += 1 }
    for k in starts.indices.dropFirst() { starts[k] += starts[k - 1] }
    var order = [Int](repeating: 0, count: all.count)
    for (k, push) in all.enumerated() {
      order[starts[push.line]] = k
      starts[push.line] += 1
    }
    sorted = (all, order)
  }

  /// Appends the pushes for traffic line `line` (lines are asked for in
  /// increasing order) to `pushes`.
  func take(line: Int, into pushes: inout [SentPush]) throws(AuditError) {
    if let (all, order) = sorted {
      while cursor < order.count && all[order[cursor]].line < line { cursor += 1 }
      while cursor < order.count && all[order[cursor]].line == line {
        pushes.append(all[order[cursor]])
        cursor += 1
      }
      return
    }
    for f in files.indices {
      while let first = heads[f].first, first.line == line {
        pushes += heads[f]
        if let behind = try advance(f, frontier: line) {
          throw .outOfOrder(file: Int(behind.file), line: behind.logLine)
        }
      }
    }
  }

  /// Reads file `f` on to its next line with pushes that belong to a
  /// traffic line from `frontier` on; returns a push behind `frontier`,
  /// if one was met.
  private func advance(_ f: Int, frontier: Int) throws(AuditError) -> SentPush? {
    heads[f] = []
    while true {
      let next: (number: Int, lines: Int, line: ParsedLogFile.Line)?
      do { next = try files[f].nextLine() } catch { throw .log(error) }
      guard let (number, lines, line) = next else { return nil }
      guard var pushes = known(line, file: Int32(f), number: number, lines: lines),
        let first = pushes.first
      else { continue }
      switch messages.place(hash: first.idHash, firstLine: first.line, from: frontier) {
      case .passed: return first
      case .line(let l):
        // (Parsed with their id's first line: only a repeated id's change,
        // so the block's pushes are rarely copied.)
        if l != first.line {
          for k in pushes.indices { pushes[k].line = l }
        }
        heads[f] = pushes
        return nil
      }
    }
  }

  /// Tallies a log line (or `lines` lines of one message's pushes); its
  /// pushes when their message is in the traffic (pushes of unknown
  /// messages and unreadable lines are kept aside).
  private func known(_ line: ParsedLogFile.Line, file: Int32, number: Int, lines: Int)
    -> ArraySlice<SentPush>?
  {
    logLines += lines
    switch line {
    case .blank:
      return nil
    case .unreadable(let reason):
      unreadable.append(UnreadableLine(file: file, line: number, reason: reason))
      return nil
    case .unknown(let pushes):
      pushesRead += pushes.count
      unknown += pushes
      return nil
    case .pushes(let pushes):
      pushesRead += pushes.count
      return pushes
    }
  }

  func path(_ file: Int32) -> String { paths[Int(file)] }
}
