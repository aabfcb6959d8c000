import CPrefetch
import FanoutEngine
import FanoutIndex
import FanoutModel
import FanoutTraffic

/// The traffic's message lines by id: where each push of a sent log
/// belongs. A hash of each evaluated message line's id (quoted as the
/// parser quotes it) with its line number, in one sorted array: 16 bytes a
/// message, whatever the size of the log.
struct MessageLines: Sendable {
  private var entries: [Entry] = []
  /// Open addressing on the hash: for each distinct hash, 1 + the index in
  /// `entries` of its first entry (0: empty). One probe, mostly one cache
  /// miss, where a binary search over `entries` would take twenty.
  private var table: [Int32] = []
  private var mask = 0

  private struct Entry: Comparable, Sendable {
    var hash: UInt64
    var line: Int
    static func < (a: Entry, b: Entry) -> Bool { (a.hash, a.line) < (b.hash, b.line) }
  }

  /// Parses the whole traffic once (in parallel, as `eval` does) for its
  /// message ids; rejected and read lines have none.
  init(messages path: String, index: Index, threads: Int) throws(TrafficInputError) {
    let reader = try LineReader(path: path)
    while let block = try reader.next(maxLines: Engine.waveLines) {
      for batch in Engine.parse(block, index: index, workers: threads) {
        for m in 0..<batch.count {
          let hash = batch.idJSON.withBytes(m) { XXH64.hash($0, seed: 0) }
          entries.append(Entry(hash: hash, line: batch.lines[m]))
        }
      }
    }
    entries.sort()
    var size = 16
    while size < entries.count * 2 { size <<= 1 }
    table = [Int32](repeating: 0, count: size)
    mask = size - 1
    for k in entries.indices where k == 0 || entries[k - 1].hash != entries[k].hash {
      var slot = Int(truncatingIfNeeded: entries[k].hash) & mask
      while table[slot] != 0 { slot = (slot + 1) & mask }
      table[slot] = Int32(k + 1)
    }
  }

  /// The index in `entries` of the first entry with `hash`, if any.
  private func first(_ hash: UInt64) -> Int? {
    var slot = Int(truncatingIfNeeded: hash) & mask
    while table[slot] != 0 {
      let k = Int(table[slot]) - 1
      if entries[k].hash == hash { return k }
      slot = (slot + 1) & mask
    }
    return nil
  }

  /// Where a push for the message whose quoted id hashes to `hash` belongs,
  /// while the lines before `frontier` are done: the id's first line from
  /// `frontier` on (an id that repeats is matched line by line, in order).
  enum Place: Equatable {
    case line(Int)
    /// Every line with this id is before `frontier`: the log is not in
    /// traffic order.
    case passed(first: Int)
  }

  /// The first line whose id hashes to each of `hashes` (-1 for none;
  /// looked up where the log is parsed, on every core, so that `place`
  /// need not look again), in steps that ask for the cache lines of every
  /// lookup before reading any.
  func firstLines(_ hashes: [UInt64], into lines: inout [Int]) {
    lines.removeAll(keepingCapacity: true)
    table.withUnsafeBufferPointer { table in
      entries.withUnsafeBufferPointer { entries in
        for hash in hashes {
          cprefetch_read(table.baseAddress! + Int(truncatingIfNeeded: hash) & mask)
        }
        for hash in hashes {
          let k = Int(table[Int(truncatingIfNeeded: hash) & mask]) - 1
          if k >= 0 { cprefetch_read(entries.baseAddress! + k) }
        }
        for hash in hashes {
          let k = Int(table[Int(truncatingIfNeeded: hash) & mask]) - 1
          if k >= 0 && entries[k].hash == hash {
            lines.append(entries[k].line)
          } else {
            lines.append(first(hash).map { entries[$0].line } ?? -1)  // probing on
          }
        }
      }
    }
  }

  /// `place` for an id whose first line is `firstLine`.
  func place(hash: UInt64, firstLine: Int, from frontier: Int) -> Place {
    if firstLine >= frontier { return .line(firstLine) }
    // An id that repeats: the first of its lines from `frontier` on.
    var lo = 0
    var hi = entries.count
    while lo < hi {
      let mid = (lo + hi) / 2
      if entries[mid] < Entry(hash: hash, line: frontier) { lo = mid + 1 } else { hi = mid }
    }
    return lo < entries.count && entries[lo].hash == hash
      ? .line(entries[lo].line) : .passed(first: firstLine)
  }
}
