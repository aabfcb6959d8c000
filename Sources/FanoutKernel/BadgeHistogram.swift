/// How many delivered pairs carried each badge (contract v3), in buckets:
/// what `fanout whatif` compares between two snapshots.
public struct BadgeHistogram: Sendable, Equatable {
  /// The buckets' lower bounds; the last is open.
  public static let bounds: [Int64] = [1, 2, 3, 4, 6, 11, 21, 51, 101]
  public static let labels = ["1", "2", "3", "4-5", "6-10", "11-20", "21-50", "51-100", "101+"]

  public var counts = [Int](repeating: 0, count: bounds.count)

  public init() {}

  /// Counts the badges of every notification of `fields`.
  public mutating func add(_ fields: NotificationFields) {
    for note in fields.notes where note.id != 0 {
      var k = Self.bounds.count - 1
      while k > 0 && note.badge < Self.bounds[k] { k -= 1 }
      counts[k] += 1
    }
  }
}
