import FanoutIndex

/// The users whose quiet hours differ between two indexes, one of which
/// differs from the other only there (`Index.differsOnlyInQuietHours`):
/// their DND schedule (as minutes of the week) or whether they defer.
///
/// Per user, a 2-byte code: 0 where nothing differs, else the user's
/// schedule and quiet action on the changed side, from a small table. A
/// what-if walks it for every pair: 2 MB at 1M users stay in cache where
/// the side's 16-byte user records would not.
public struct QuietHoursChange: Sendable {
  /// Per user row: 0, an entry of `quietHours` + 1, or `Self.elsewhere`.
  fileprivate let codes: [UInt16]
  /// The changed side's (DND pattern, defers) pairs met.
  fileprivate let quietHours: [(pattern: Int32, defers: Bool)]
  /// How many users' quiet hours differ.
  public let users: Int
  /// The code of a user whose quiet hours are past the table's room: the
  /// changed side's user record has them.
  static let elsewhere = UInt16.max

  /// The change from `a` to `b`; nil unless `b` differs from `a` only in
  /// its users' quiet hours.
  public init?(_ b: Index, from a: Index) {
    guard b.differsOnlyInQuietHours(from: a) else { return nil }
    let (ca, cb) = (IndexColumns(a), IndexColumns(b))
    let words = DNDPattern.wordCount
    // Schedules are numbered per index: compared word by word, once per
    // pair of numbers met.
    var samePatterns: [Int64: Bool] = [:]
    func same(_ pa: Int32, _ pb: Int32) -> Bool {
      if pa < 0 || pb < 0 { return pa == pb }
      let key = Int64(pa) << 32 | Int64(pb)
      if let known = samePatterns[key] { return known }
      let equal = ca.dndWords[Int(pa) * words..<Int(pa + 1) * words].elementsEqual(
        cb.dndWords[Int(pb) * words..<Int(pb + 1) * words])
      samePatterns[key] = equal
      return equal
    }
    var codes = [UInt16](repeating: 0, count: a.users.count)
    var quietHours: [(pattern: Int32, defers: Bool)] = []
    var codeOf: [Int64: UInt16] = [:]
    var users = 0
    for u in 0..<a.users.count {
      let (sa, sb) = (ca.userState[u], cb.userState[u])
      guard sa.defers != sb.defers || !same(sa.dnd, sb.dnd) else { continue }
      users += 1
      let key = Int64(sb.dnd) << 1 | (sb.defers ? 1 : 0)
      if let code = codeOf[key] {
        codes[u] = code
      } else if quietHours.count < Int(Self.elsewhere) - 1 {
        quietHours.append((sb.dnd, sb.defers))
        codes[u] = UInt16(quietHours.count)
        codeOf[key] = codes[u]
      } else {
        codes[u] = Self.elsewhere
      }
    }
    self.codes = codes
    self.quietHours = quietHours
    self.users = users
  }
}

/// The quiet-hours changes of several what-if sides from one A (a sweep of
/// quiet-hours variants), walked together: a user's codes for every side
/// lie side by side, so that one walk over A's pairs reads one place per
/// member for all sides, where a walk per side read each side's codes and
/// A's user records again (`Evaluator.redecideQuietHours`).
public struct QuietHoursChanges: Sendable {
  public let sides: Int
  /// Per user row, per side: that side's code (`QuietHoursChange`).
  private let codes: [UInt16]
  /// The sides' tables of quiet hours, one after the other: side s's code
  /// c is entry `starts[s] + c − 1`.
  private let quietHours: [(pattern: Int32, defers: Bool)]
  private let starts: [Int]

  public init(_ changes: [QuietHoursChange]) {
    sides = changes.count
    let users = changes.first?.codes.count ?? 0
    var codes = [UInt16](repeating: 0, count: users * sides)
    for (s, change) in changes.enumerated() {
      for u in 0..<users { codes[u * sides + s] = change.codes[u] }
    }
    self.codes = codes
    quietHours = changes.flatMap(\.quietHours)
    starts = changes.reduce(into: [0]) { $0.append($0.last! + $1.quietHours.count) }
  }

  /// Runs `body` with the codes (user row u's for side s at `u * sides +
  /// s`) and the sides' quiet hours (`Tables.quietHours`).
  @inline(__always)
  func withTables<R>(_ body: (_ codes: UnsafeBufferPointer<UInt16>, _ tables: Tables) -> R) -> R {
    codes.withUnsafeBufferPointer { codes in
      quietHours.withUnsafeBufferPointer { table in
        starts.withUnsafeBufferPointer { starts in
          body(codes, Tables(table: table, starts: starts))
        }
      }
    }
  }

  /// The sides' tables of quiet hours, as buffers.
  struct Tables {
    let table: UnsafeBufferPointer<(pattern: Int32, defers: Bool)>
    let starts: UnsafeBufferPointer<Int>

    /// Side `side`'s quiet hours for code `code` (not 0 or `elsewhere`).
    @inline(__always)
    func quietHours(side: Int, _ code: UInt16) -> (pattern: Int32, defers: Bool) {
      table[starts[side] &+ Int(code) &- 1]
    }
  }
}
