/// The `presence` table per user: each user's windows `[from, until)`,
/// sorted and merged (overlapping or touching windows become one, empty ones
/// are dropped), so that "is ts in a window" is one binary search.
public struct PresenceWindows: Sendable {
  /// CSR: user row → windows (`2 * w`, `2 * w + 1` in `bounds`).
  package let starts: Column<Int32>
  package let bounds: Column<Int64>

  package init(users: Int, rows: [(user: Int32, from: Int64, until: Int64)]) {
    var starts = [Int32](repeating: 0, count: users + 1)
    var bounds: [Int64] = []
    let sorted = rows.filter { $0.from < $0.until }.sorted {
      ($0.user, $0.from, $0.until) < ($1.user, $1.from, $1.until)
    }
    var i = 0
    for u in 0..<users {
      var lastUntil = Int64.min
      while i < sorted.count && sorted[i].user == Int32(u) {
        let w = sorted[i]
        if !bounds.isEmpty && Int(starts[u]) * 2 < bounds.count && w.from <= lastUntil {
          bounds[bounds.count - 1] = max(lastUntil, w.until)
        } else {
          bounds += [w.from, w.until]
        }
        lastUntil = bounds[bounds.count - 1]
        i += 1
      }
      starts[u + 1] = Int32(bounds.count / 2)
    }
    self.starts = Column(starts)
    self.bounds = Column(bounds)
  }

  /// A compiled index's windows, as stored.
  package init(starts: Column<Int32>, bounds: Column<Int64>) {
    self.starts = starts
    self.bounds = bounds
  }

  /// Whether user row `u` has any window.
  public func hasWindows(user u: Int) -> Bool { starts[u + 1] > starts[u] }

  /// Whether `ts` lies in one of user row `u`'s windows.
  @inline(__always)
  public func contains(user u: Int, _ ts: Int64) -> Bool {
    var lo = Int(starts[u])
    var hi = Int(starts[u + 1])
    // The last window starting at or before ts is the only one that can hold it.
    while lo < hi {
      let mid = (lo &+ hi) &>> 1
      if bounds[2 &* mid] <= ts { lo = mid &+ 1 } else { hi = mid }
    }
    return lo > Int(starts[u]) && ts < bounds[2 &* (lo &- 1) &+ 1]
  }
}
