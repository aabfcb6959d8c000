import FanoutIndex
import FanoutOutput

/// A sent log's line that could not be read: skipped, and reported with
/// its file and line number.
struct UnreadableLine {
  var file: Int32
  var line: Int
  var reason: String
}

/// The pushes of the sent logs, handed out traffic line by traffic line.
///
/// A log in traffic order (as Fanout's own gateway files are, and a log
/// per gateway written as pushes go out, deferred ones aside) is read as
/// the traffic is evaluated, the files side by side, holding only the
/// pushes of the line at hand: memory does not grow with the log. When a
/// push turns up behind the line at hand (its message's lines are all
/// done), the log is not in traffic order: `take` throws `OutOfOrder`, and
/// the audit starts again with `SentLogs(sortedFrom:)`, which reads every
/// push first (about 48 bytes each) and sorts them by traffic line.
final class SentLogs {
  private let paths: [String]
  private let messages: MessageLines
  private var parser: SentLogParser
  /// Streaming: per file, its reader and the pushes of its next line.
  private var readers: [LZ4LineReader] = []
  private var heads: [[SentPush]] = []
  private var lineNumbers: [Int] = []
  /// Sorted: every push, by traffic line, and the next to hand out.
  private var sorted: [SentPush]? = nil
  private var cursor = 0

  /// Pushes naming a message that no traffic line has, in log order.
  private(set) var unknown: [SentPush] = []
  private(set) var unreadable: [UnreadableLine] = []
  private(set) var logLines = 0
  private(set) var pushesRead = 0
  var isSorted: Bool { sorted != nil }

  /// Opens the logs to read them in traffic order.
  init(paths: [String], messages: MessageLines, index: Index) throws(AuditError) {
    self.paths = paths
    self.messages = messages
    parser = SentLogParser(index: index)
    for path in paths {
      do {
        readers.append(try LZ4LineReader(path: path, plainTextAccepted: true))
      } catch { throw .log(error) }
      heads.append([])
      lineNumbers.append(0)
    }
    for f in paths.indices { _ = try advance(f, frontier: 0) }
  }

  /// Reads every push of the logs, then sorts them by traffic line (each
  /// placed at its message id's first line).
  init(sortedFrom paths: [String], messages: MessageLines, index: Index) throws(AuditError) {
    self.paths = paths
    self.messages = messages
    parser = SentLogParser(index: index)
    var all: [SentPush] = []
    for (f, path) in paths.enumerated() {
      var number = 0
      do {
        let reader = try LZ4LineReader(path: path, plainTextAccepted: true)
        while let line = try reader.nextLine() {
          number += 1
          guard let (message, pushes) = parsedLine(line, file: Int32(f), number: number),
            let first = pushes.first
          else { continue }
          switch messages.place(hash: first.idHash, from: 0) {
          case .line(let l):
            all += pushes.map {
              var placed = $0
              placed.line = l
              return placed
            }
          case .passed, .unknown: unknown += pushes.map { unknownPush($0, message: message) }
          }
        }
      } catch { throw .log(error) }
    }
    // Stable: a line's pushes stay in log order (file, then line).
    all.sort { ($0.line, $0.file, $0.logLine) < ($1.line, $1.file, $1.logLine) }
    sorted = all
  }

  /// Appends the pushes for traffic line `line` (lines are asked for in
  /// increasing order) to `pushes`.
  func take(line: Int, into pushes: inout [SentPush]) throws(AuditError) {
    if let all = sorted {
      while cursor < all.count && all[cursor].line < line { cursor += 1 }
      while cursor < all.count && all[cursor].line == line {
        pushes.append(all[cursor])
        cursor += 1
      }
      return
    }
    for f in readers.indices {
      while let first = heads[f].first, first.line == line {
        pushes += heads[f]
        if let behind = try advance(f, frontier: line) {
          throw .outOfOrder(file: Int(behind.file), line: behind.logLine)
        }
      }
    }
  }

  /// Reads file `f` on to its next line with pushes that belong to a
  /// traffic line from `frontier` on, keeping pushes of unknown messages
  /// aside; returns where a push behind `frontier` was met, if one was.
  private func advance(_ f: Int, frontier: Int) throws(AuditError) -> SentPush? {
    heads[f] = []
    while true {
      let next: ArraySlice<UInt8>?
      do { next = try readers[f].nextLine() } catch { throw .log(error) }
      guard let line = next else { return nil }
      lineNumbers[f] += 1
      guard let (message, parsed) = parsedLine(line, file: Int32(f), number: lineNumbers[f]),
        let first = parsed.first
      else { continue }
      var pushes = parsed
      switch messages.place(hash: first.idHash, from: frontier) {
      case .unknown:
        unknown += pushes.map { unknownPush($0, message: message) }
      case .passed:
        return first
      case .line(let l):
        for k in pushes.indices { pushes[k].line = l }
        heads[f] = pushes
        return nil
      }
    }
  }

  /// A push of a message no traffic line has, with the id the log gave.
  private func unknownPush(_ push: SentPush, message: [UInt8]) -> SentPush {
    var push = push
    let names = push.names ?? SentPush.Names()
    names.message = message
    push.names = names
    return push
  }

  /// One log line's message id (quoted) and pushes; nil for a blank line
  /// and for an unreadable one, which is noted.
  private func parsedLine(_ line: ArraySlice<UInt8>, file: Int32, number: Int)
    -> (message: [UInt8], pushes: [SentPush])?
  {
    logLines += 1
    let text = line.last == 0x0D ? line.dropLast() : line
    if text.allSatisfy({ $0 == 0x20 || $0 == 0x09 }) { return nil }
    let result = text.withUnsafeBytes { raw in
      Result { () throws(SentLogParser.Failure) in try parser.parse(raw, file: file, number: number)
      }
    }
    switch result {
    case .success(let parsed):
      pushesRead += parsed.pushes.count
      return parsed
    case .failure(let failure):
      unreadable.append(UnreadableLine(file: file, line: number, reason: failure.reason))
      return nil
    }
  }

  func path(_ file: Int32) -> String { paths[Int(file)] }
}
