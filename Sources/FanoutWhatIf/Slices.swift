/// FanoutWhatIf replays one traffic file against two snapshots (A, and B:
/// another snapshot or A with a scenario's SQL applied), compares every
/// pair's outcome, and reports the difference as JSON, as a list of changed
/// pairs, and as a self-contained HTML page.
import FanoutModel

/// The two snapshots being compared.
public enum Side: Int, CaseIterable, Sendable {
  case a = 0
  case b = 1

  public var name: String { self == .a ? "a" : "b" }
}

/// The slices of pairs that the report breaks delivered / suppressed counts
/// down by, numbered into one flat range.
public enum Slice {
  /// Channel sizes (members) by bucket; a channel of one member has pairs
  /// only for messages its member did not send.
  public static let sizeBuckets = ["1", "2", "3-10", "11-100", "101-1000", "1001-10000", ">10000"]

  static let kinds = 0
  static let sizes = kinds + Scope.allCases.count
  static let utcHours = sizes + sizeBuckets.count
  static let localHours = utcHours + 24
  /// The UTC hour a pair is delivered at (later than its message's when deferred).
  static let deliveryHours = localHours + 24
  static let count = deliveryHours + 24

  static func sizeBucket(members: Int) -> Int {
    switch members {
    case ...1: 0
    case 2: 1
    case 3...10: 2
    case 11...100: 3
    case 101...1_000: 4
    case 1_001...10_000: 5
    default: 6
    }
  }
}

/// One side's delivered and suppressed pairs per slice (or, for a B
/// tallied relative to A, B's minus A's).
struct SideSlices: Sendable, Equatable {
  var counts = [Int](repeating: 0, count: Slice.count * 2)

  @inline(__always)
  mutating func count(_ slice: Int, delivered: Bool, by n: Int) {
    counts[slice &* 2 &+ (delivered ? 0 : 1)] &+= n
  }

  @inline(__always)
  mutating func count(_ slice: Int, delivered: Int, suppressed: Int) {
    counts[slice &* 2] &+= delivered
    counts[slice &* 2 &+ 1] &+= suppressed
  }

  mutating func add(_ other: SideSlices) {
    for i in counts.indices { counts[i] &+= other.counts[i] }
  }
}

/// Delivered and suppressed pairs per side and slice.
public struct SliceCounts: Sendable, Equatable {
  private var counts: [Int]

  init(a: SideSlices, b: SideSlices) { counts = a.counts + b.counts }

  func tally(_ side: Side, _ slice: Int) -> Tally {
    let i = (side.rawValue * Slice.count + slice) * 2
    return Tally(delivered: counts[i], suppressed: counts[i + 1])
  }

  public func byKind(_ side: Side) -> [Tally] {
    Scope.allCases.map { tally(side, Slice.kinds + Int($0.rawValue)) }
  }

  public func bySize(_ side: Side) -> [Tally] {
    Slice.sizeBuckets.indices.map { tally(side, Slice.sizes + $0) }
  }

  public func byHourUTC(_ side: Side) -> [Tally] {
    (0..<24).map { tally(side, Slice.utcHours + $0) }
  }

  public func byHourLocal(_ side: Side) -> [Tally] {
    (0..<24).map { tally(side, Slice.localHours + $0) }
  }

  /// Delivered pairs by the UTC hour they are delivered at; suppressed ones
  /// by their message's.
  public func byDeliveryHourUTC(_ side: Side) -> [Tally] {
    (0..<24).map { tally(side, Slice.deliveryHours + $0) }
  }
}

/// Pairs delivered and suppressed in one slice.
public struct Tally: Sendable, Equatable {
  public var delivered: Int
  public var suppressed: Int
}
