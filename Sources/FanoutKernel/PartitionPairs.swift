/// A chunk's pairs that one partition of a ledger walks, in order: where
/// each is in the chunk's `DeliveredPairs`, and its message (in the
/// chunk). Listed first, so that the walk can ask for the ledger's entries
/// of the pairs some places ahead.
struct PartitionPairs {
  var pair: [Int32] = []
  var message: [Int32] = []
  var count: Int { pair.count }

  /// The pairs of `pairs` in the messages `message` keeps that `pair`
  /// keeps (each given its place in the chunk).
  @inline(__always)
  mutating func collect(
    _ pairs: DeliveredPairs, message keepsMessage: (Int) -> Bool = { _ in true },
    pair keepsPair: (Int) -> Bool
  ) {
    pair.removeAll(keepingCapacity: true)
    message.removeAll(keepingCapacity: true)
    var start = 0
    for (j, end) in pairs.ends.enumerated() {
      defer { start = Int(end) }
      guard keepsMessage(j) else { continue }
      for i in start..<Int(end) where keepsPair(i) {
        pair.append(Int32(truncatingIfNeeded: i))
        message.append(Int32(truncatingIfNeeded: j))
      }
    }
  }
}
