import FanoutIndex
import FanoutModel
import FanoutPipeline
import FanoutTraffic

/// The traffic's message lines by id: where each push of a sent log
/// belongs. A hash of each evaluated message line's id (quoted as the
/// parser quotes it) with its line number, in one sorted array: 16 bytes a
/// message, whatever the size of the log.
struct MessageLines {
  private var entries: [Entry] = []

  private struct Entry: Comparable {
    var hash: UInt64
    var line: Int
    static func < (a: Entry, b: Entry) -> Bool { (a.hash, a.line) < (b.hash, b.line) }
  }

  /// Parses the whole traffic once (in parallel, as `eval` does) for its
  /// message ids; rejected and read lines have none.
  init(messages path: String, index: Index, threads: Int) throws(TrafficInputError) {
    let reader = try LineReader(path: path)
    while let block = try reader.next(maxLines: Pipeline.waveLines) {
      for batch in Pipeline.parse(block, index: index, workers: threads) {
        for m in 0..<batch.count {
          let hash = batch.idJSON.withBytes(m) { XXH64.hash($0, seed: 0) }
          entries.append(Entry(hash: hash, line: batch.lines[m]))
        }
      }
    }
    entries.sort()
  }

  /// Where a push for the message whose quoted id hashes to `hash` belongs,
  /// while the lines before `frontier` are done: the id's first line from
  /// `frontier` on (an id that repeats is matched line by line, in order).
  enum Place: Equatable {
    case line(Int)
    /// Every line with this id is before `frontier`: the log is not in
    /// traffic order.
    case passed(first: Int)
    /// No message line has this id.
    case unknown
  }

  func place(hash: UInt64, from frontier: Int) -> Place {
    var lo = 0
    var hi = entries.count
    while lo < hi {
      let mid = (lo + hi) / 2
      if entries[mid] < Entry(hash: hash, line: frontier) { lo = mid + 1 } else { hi = mid }
    }
    if lo < entries.count && entries[lo].hash == hash { return .line(entries[lo].line) }
    if lo > 0 && entries[lo - 1].hash == hash {
      var first = lo - 1
      while first > 0 && entries[first - 1].hash == hash { first -= 1 }
      return .passed(first: entries[first].line)
    }
    return .unknown
  }
}
