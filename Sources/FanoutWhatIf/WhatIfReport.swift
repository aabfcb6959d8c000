import CPrefetch
import FanoutIndex
import FanoutKernel
import FanoutModel
import FanoutOutput
import FanoutReport
import FanoutTraffic

/// The channels the traffic names, numbered in the order first met: the
/// totals count per number, not per channel row, since a day's traffic
/// names a fraction of the channels (at 1M, 1.6M of 6.6M) and each side's
/// counts are fresh memory (in a sweep of five, 318 MB by channel row).
struct ChannelNumbers {
  /// Per channel row, its number + 1 (0: not met yet).
  private var numberOfRow: [Int32]
  /// Per number, its channel row.
  private(set) var rows: [Int32] = []

  init(channels: Int) {
    numberOfRow = [Int32](repeating: 0, count: channels)
    // Address space only: its pages come as numbers are given.
    rows.reserveCapacity(channels)
  }

  var count: Int { rows.count }

  /// The numbers of `channels` (rows), numbering those met for the first time.
  mutating func number(_ channels: [Int32]) -> [Int32] {
    var numbers = [Int32](repeating: 0, count: channels.count)
    numberOfRow.withUnsafeMutableBufferPointer { numberOfRow in
      for k in channels.indices {
        let ahead = k &+ SideTotals.rowsAhead
        if ahead < channels.count {
          cprefetch_read(numberOfRow.baseAddress! + Int(channels[ahead]))
        }
        let row = Int(channels[k])
        if numberOfRow[row] == 0 {
          rows.append(channels[k])
          // At most one per channel row, whose count fits an Int32.
          numberOfRow[row] = Int32(truncatingIfNeeded: rows.count)
        }
        numbers[k] = numberOfRow[row] &- 1
      }
    }
    return numbers
  }
}

/// One side's totals over the run, merged from its `SideChunk`s in chunk
/// order; a B tallied relative to A holds B's minus A's until `over(_:)`
/// (its channels' counts even after).
struct SideTotals {
  var counters: Counters
  var slices = SideSlices()
  /// Delivered pairs per channel, by its `ChannelNumbers` number, and per
  /// user row.
  var channelDelivered: [Int] = []
  var userDelivered: [Int]
  /// Whether `channelDelivered` is still B's minus A's (`over(_:)`).
  private(set) var channelsAreDifference = false

  init(users: Int, channels: Int, gateways: Int) {
    counters = Counters(gateways: gateways)
    // Address space only: its pages come as channels are numbered.
    channelDelivered.reserveCapacity(channels)
    userDelivered = [Int](repeating: 0, count: users)
  }

  /// Adds a chunk whose messages' channels have `numbers`, of `numbered`
  /// channels met so far.
  mutating func add(_ side: SideChunk, channels numbers: [Int32], numbered: Int) {
    counters.add(side.counters)
    slices.add(side.slices)
    if channelDelivered.count < numbered {
      channelDelivered.append(
        contentsOf: repeatElement(0, count: numbered - channelDelivered.count))
    }
    // Each row is a cache miss, asked for `rowsAhead` ahead; a relative
    // side's channel counts are mostly 0, and its channels left alone.
    channelDelivered.withUnsafeMutableBufferPointer { counts in
      let delivered = side.messageDelivered
      for k in numbers.indices {
        let ahead = k &+ Self.rowsAhead
        if ahead < numbers.count && delivered[ahead] != 0 {
          cprefetch_read(counts.baseAddress! + Int(numbers[ahead]))
        }
        if delivered[k] != 0 { counts[Int(numbers[k])] &+= Int(delivered[k]) }
      }
    }
    userDelivered.withUnsafeMutableBufferPointer { counts in
      for (users, sign) in [(side.deliveredUsers, 1), (side.undeliveredUsers, -1)] {
        for k in users.indices {
          let ahead = k &+ Self.rowsAhead
          if ahead < users.count { cprefetch_read(counts.baseAddress! + Int(users[ahead])) }
          counts[Int(users[k])] &+= sign
        }
      }
    }
  }

  /// How many rows ahead the totals' scattered counts are asked for.
  static let rowsAhead = 16

  /// These relative totals made whole, A's (`a`) plus the difference,
  /// but for the channels' counts: only the top channels are shown.
  func over(_ a: SideTotals) -> SideTotals {
    var whole = self
    whole.slices.add(a.slices)
    for u in whole.userDelivered.indices { whole.userDelivered[u] &+= a.userDelivered[u] }
    whole.channelsAreDifference = true
    return whole
  }
}

/// One B's pairs against A's over the run, merged from its `PairChanges`.
struct ChangeTotals {
  var transitions = [Int](repeating: 0, count: Outcome.allCases.count * Outcome.allCases.count)
  var changedPairs = 0
  /// Per user row, the traffic line of its first changed pair (0: none;
  /// lines are numbered from 1).
  var userFirstChange: [Int]
  /// Each changed channel's first changed pair, in the order met: 16
  /// bytes per channel changed, where a place per channel row took 4 per
  /// channel (at 1M, 6.6M channels: 26 MB per B of a sweep); only the top
  /// channels' are ever looked up (`firstChanges(ofChannels:)`).
  private var firstChanges: [(line: Int, user: Int32, channel: Int32)] = []

  /// Which user and channel rows have their first change: one bit each,
  /// so that the many changes after a row's first read no row of the
  /// large table above (at 1M, 128 KB against 8 MB).
  private var userSeen: [UInt64]
  private var channelSeen: [UInt64]

  init(users: Int, channels: Int) {
    userFirstChange = [Int](repeating: 0, count: users)
    userSeen = [UInt64](repeating: 0, count: users / 64 + 1)
    channelSeen = [UInt64](repeating: 0, count: channels / 64 + 1)
  }

  mutating func add(_ changes: PairChanges) {
    for i in transitions.indices { transitions[i] &+= changes.transitions[i] }
    changedPairs &+= changes.changedPairs
    let (users, channels) = (changes.changedUsers, changes.changedChannels)
    userFirstChange.withUnsafeMutableBufferPointer { userFirst in
      userSeen.withUnsafeMutableBufferPointer { userSeen in
        channelSeen.withUnsafeMutableBufferPointer { channelSeen in
          for k in users.indices {
            let (u, c) = (Int(users[k]), Int(channels[k]))
            let (userBit, channelBit) = (UInt64(1) << (u & 63), UInt64(1) << (c & 63))
            if userSeen[u >> 6] & userBit == 0 {
              userSeen[u >> 6] |= userBit
              userFirst[u] = changes.changedLines[k]
            }
            if channelSeen[c >> 6] & channelBit == 0 {
              channelSeen[c >> 6] |= channelBit
              firstChanges.append((changes.changedLines[k], users[k], channels[k]))
            }
          }
        }
      }
    }
  }

  /// The first changed pair (its traffic line and user row) of each of
  /// the channel rows `rows`, or nil for one with none: one pass over the
  /// changed channels.
  func firstChanges(ofChannels rows: [Int]) -> [(line: Int, user: Int32)?] {
    var found = [(line: Int, user: Int32)?](repeating: nil, count: rows.count)
    guard !rows.isEmpty else { return found }
    var wanted = [UInt64](repeating: 0, count: channelSeen.count)
    for row in rows { wanted[row >> 6] |= UInt64(1) << (row & 63) }
    let place = Dictionary(rows.enumerated().map { ($1, $0) }) { first, _ in first }
    for change in firstChanges {
      let c = Int(change.channel)
      guard wanted[c >> 6] & (UInt64(1) << (c & 63)) != 0 else { continue }
      found[place[c]!] = (change.line, change.user)
    }
    return found
  }

  /// The users with any pair changed.
  var usersChanged: Int { userFirstChange.reduce(0) { $0 + ($1 != 0 ? 1 : 0) } }
}

/// A comparison's totals, both sides whole but for B's channel counts
/// (`RowCounts`): what `WhatIfReport` is made of.
struct ComparisonTotals {
  var rejected = 0
  var counters: [Counters]
  var slices: SliceCounts
  /// Delivered pairs per channel; per side, per user row.
  var channelDelivered: RowCounts
  var userDelivered: [[Int]]
  /// B's pairs against A's.
  var changes: ChangeTotals
  var firstTs: Int64
  var lastTs: Int64

  /// - Parameter channels: the channel rows of the sides' channel numbers.
  init(
    a: SideTotals, b: SideTotals, channels: ChannelNumbers, changes: ChangeTotals,
    firstTs: Int64, lastTs: Int64
  ) {
    counters = [a.counters, b.counters]
    slices = SliceCounts(a: a.slices, b: b.slices)
    channelDelivered = RowCounts(
      a: a.channelDelivered, b: b.channelDelivered, bIsDifference: b.channelsAreDifference,
      rows: channels.rows)
    userDelivered = [a.userDelivered, b.userDelivered]
    self.changes = changes
    self.firstTs = firstTs
    self.lastTs = lastTs
  }

  var messages: Int { counters[0].messages }
}

/// Delivered pairs per row (channel or user) on both sides: A's, and B's
/// whole or as its difference from A's; counted per row, or per number
/// with each number's row in `rows`.
struct RowCounts {
  var a: [Int]
  var b: [Int]
  var bIsDifference = false
  var rows: [Int32]? = nil

  /// B's count minus A's at `k`.
  @inline(__always)
  func change(_ k: Int) -> Int { bIsDifference ? b[k] : b[k] &- a[k] }

  /// The row counted at `k`.
  @inline(__always)
  func row(_ k: Int) -> Int { rows.map { Int($0[k]) } ?? k }
}

/// Everything `report.json`, `report.html` and the terminal table show.
public struct WhatIfReport: Sendable {
  /// One snapshot's totals, as `summary.json` of `fanout eval` would give them.
  public struct Totals: Sendable {
    /// What the side is: a snapshot path, or A's path with SQL applied.
    public var snapshot: String
    public var sql: String?
    public var pairs: Int
    public var delivered: Int
    /// Delivered pairs whose delivery time is later than their message's ts.
    public var deferred: Int
    /// Per reason, in rule order.
    public var suppressed: [Int]
    /// Contract v3, when the side turns notification groups on.
    public var notifications: Notifications?
    /// With `--sql`: the rows it inserted, updated or deleted, per table it
    /// wrote, by table name (empty: it changed nothing, B is A).
    public var rowsChanged: [(table: String, rows: Int)]? = nil

    /// "3 rows (users 2, settings 1)", "no row: B is A".
    public var rowsChangedWords: String? {
      guard let rowsChanged else { return nil }
      guard !rowsChanged.isEmpty else { return "no row, and wrote no table: B is A" }
      let total = rowsChanged.reduce(0) { $0 + $1.rows }
      return counted(total, "row") + " ("
        + rowsChanged.map { "\($0.table) \($0.rows)" }.joined(separator: ", ") + ")"
    }
  }

  /// One side's notification state over the run (contract v3).
  public struct Notifications: Sendable {
    public var counters: NotificationCounters
    /// The badges of the delivered pairs.
    public var badges: BadgeHistogram
  }

  /// A channel or user whose delivered pair count changed, with an
  /// example: the first pair of it whose outcome changed.
  public struct Change: Sendable {
    public var id: String
    public var a: Int
    public var b: Int
    public var change: Int { b - a }
    public var example: Example?
  }

  /// A changed pair: its traffic line, the message's id (when the traffic
  /// can be read again: not standard input), its user.
  public struct Example: Sendable {
    public var line: Int
    public var message: String?
    public var user: String
  }

  public static let topCount = 20

  public var sides: [Totals]
  /// The traffic file (or `-`).
  public var traffic: String
  public var messages: Int
  public var rejected: Int
  /// The first rejected line (in line order), and the lines read: for the
  /// run's word on standard error (not written to the report files).
  public var firstRejection: Rejection?
  public var linesRead = 0
  public var changedPairs: Int
  /// `Outcome.allCases.count²` cells, row = A's outcome, column = B's.
  public var transitions: [Int]
  public var slices: SliceCounts
  /// Every gateway of A or B, sorted by name; per side, deliveries (delivered)
  /// and devices the gateway gate blocked (suppressed).
  public var gateways: [String]
  public var byGateway: [[Tally]]
  public var topChannels: [Change]
  public var topUsers: [Change]
  /// Users with at least one pair whose outcome changed.
  public var usersAffected: Int
  /// Whole days the traffic spans (at least 1), and per side the delivered
  /// pairs per user per day.
  public var days: Int
  public var budget: Int
  public var pushesPerDay: [PushesPerDay]

  /// Delivered pairs (pushes a person sees) per user per day, among the
  /// users who get at least one on either side: nearest-rank percentiles,
  /// in tenths, and how many are above the budget.
  public struct PushesPerDay: Sendable {
    public var users = 0
    public var p50Tenths = 0
    public var p90Tenths = 0
    public var p99Tenths = 0
    public var maxTenths = 0
    public var overBudget = 0

    public init() {}

    /// Ranks per-user tenths of a push per day, by counting rather than
    /// sorting (a sweep ranks two sides of 1M users per variant): values
    /// below `histogramSize` in a histogram, the few larger ones sorted.
    init(tenths: [Int], budget: Int) {
      var small = [Int](repeating: 0, count: Self.histogramSize)
      var large: [Int] = []
      // A budget too large for tenths (--budget up to Int.max) has no one over it.
      let (budgetTenths, beyond) = budget.multipliedReportingOverflow(by: 10)
      let limit = beyond ? Int.max : budgetTenths
      for t in tenths {
        if t < small.count { small[t] += 1 } else { large.append(t) }
        maxTenths = max(maxTenths, t)
        if t > limit { overBudget += 1 }
      }
      large.sort()
      users = tenths.count
      func rank(_ p: Int) -> Int {
        guard !tenths.isEmpty else { return 0 }
        var k = max(0, (p * tenths.count + 99) / 100 - 1)  // its place in sorted order
        for (t, count) in small.enumerated() {
          if k < count { return t }
          k -= count
        }
        return large[k]
      }
      (p50Tenths, p90Tenths, p99Tenths) = (rank(50), rank(90), rank(99))
    }

    static let histogramSize = 4096
  }
  /// Wall-clock seconds per phase of the run, in order (not written to the
  /// report files, which depend only on the inputs).
  public var phases: [(phase: String, seconds: Double)] = []
  public var seconds: Double { phases.reduce(0) { $0 + $1.seconds } }

  init(
    _ totals: ComparisonTotals, a: Index, b: Index, options: WhatIfOptions,
    scenario: WhatIfOptions.Scenario, notifications: [Notifications?]
  ) {
    let sql: String? =
      switch scenario {
      case .snapshot: nil
      case .sql(let text): text
      }
    let bPath: String =
      switch scenario {
      case .snapshot(let path): path
      case .sql: options.snapshot
      }
    sides = [(options.snapshot, nil), (bPath, sql)].enumerated().map { s, side in
      let c = totals.counters[s]
      return Totals(
        snapshot: side.0, sql: side.1, pairs: c.pairs, delivered: c.delivered, deferred: c.deferred,
        suppressed: c.suppressed, notifications: notifications[s])
    }
    traffic = options.messages
    messages = totals.messages
    rejected = totals.rejected
    changedPairs = totals.changes.changedPairs
    transitions = totals.changes.transitions
    slices = totals.slices

    let indexes = [a, b]
    let names = Set(
      indexes.flatMap { index in (0..<index.gateways.count).map { index.gateways[$0] } }
    )
    .sorted { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) }
    gateways = names
    byGateway = (0..<2).map { s in
      let rows = indexes[s].gateways
      let row = Dictionary(uniqueKeysWithValues: (0..<rows.count).map { (rows[$0], $0) })
      return names.map { name in
        guard let g = row[name] else { return Tally(delivered: 0, suppressed: 0) }
        return Tally(
          delivered: totals.counters[s].deliveries[g], suppressed: totals.counters[s].blocked[g])
      }
    }
    topChannels = Self.top(totals.channelDelivered, names: a.channels) { rows in
      totals.changes.firstChanges(ofChannels: rows).map {
        $0.map { Example(line: $0.line, user: a.users[Int($0.user)]) }
      }
    }
    topUsers = Self.top(
      RowCounts(a: totals.userDelivered[0], b: totals.userDelivered[1]), names: a.users
    ) { rows in
      rows.map { row in
        let line = totals.changes.userFirstChange[row]
        return line == 0 ? nil : Example(line: line, user: a.users[row])
      }
    }
    usersAffected = totals.changes.usersChanged
    // Whole days from the first message's ts to the last (any Int64s: the
    // span may not fit one).
    let dayMillis: Int64 = 86_400_000
    let (span, overflow) = totals.lastTs.subtractingReportingOverflow(totals.firstTs)
    days =
      totals.firstTs > totals.lastTs
      ? 1 : overflow ? Int(Int64.max / dayMillis) + 1 : Int(span / dayMillis) + 1
    budget = options.budget
    let received = totals.userDelivered[0].indices.filter {
      totals.userDelivered[0][$0] > 0 || totals.userDelivered[1][$0] > 0
    }
    pushesPerDay = (0..<2).map { [days, budget] s in
      // Tenths of a push per day: `count * 10 / days`, rounded down.
      PushesPerDay(tenths: received.map { totals.userDelivered[s][$0] * 10 / days }, budget: budget)
    }
  }

  /// The run in one sentence: what B does to the delivered pairs, and how
  /// many pairs change outcome ("B delivers 9,820 more pairs than A
  /// (+4.8%); 14,554 pairs change outcome").
  public var headline: String {
    let (a, b) = (sides[0].delivered, sides[1].delivered)
    let delivered =
      a == b
      ? "B delivers as many pairs as A (\(Format.grouped(a)))"
      : "B delivers \(Format.grouped(abs(b - a))) \(b > a ? "more" : "fewer") pairs than A "
        + "(\(Format.percent(from: a, to: b)))"
    return delivered + "; \(Format.grouped(changedPairs)) "
      + (changedPairs == 1 ? "pair changes" : "pairs change") + " outcome"
  }

  /// Deliveries per gateway name of one side, gateways without deliveries left out.
  public func deliveries(_ side: Side) -> [(gateway: String, count: Int)] {
    gateways.indices.compactMap { g in
      let n = byGateway[side.rawValue][g].delivered
      return n > 0 ? (gateways[g], n) : nil
    }
  }

  public func transitions(from a: Outcome, to b: Outcome) -> Int {
    transitions[Int(a.rawValue) * Outcome.allCases.count + Int(b.rawValue)]
  }

  /// The traffic lines of the examples, whose message ids `nameExamples` sets.
  var exampleLines: Set<Int> {
    Set((topChannels + topUsers).compactMap { $0.example?.line })
  }

  /// Sets the examples' message ids from `ids` (by traffic line), read
  /// once for every report of a run (`messageIDs`).
  mutating func nameExamples(_ ids: [Int: String]) {
    for k in topChannels.indices {
      let line = topChannels[k].example?.line ?? 0
      topChannels[k].example?.message = ids[line]
    }
    for k in topUsers.indices {
      let line = topUsers[k].example?.line ?? 0
      topUsers[k].example?.message = ids[line]
    }
  }

  /// The message ids on traffic lines `lines` of the file at `path` (none
  /// for standard input, or a file that cannot be read again).
  static func messageIDs(path: String, lines: Set<Int>) -> [Int: String] {
    guard path != "-", !lines.isEmpty,
      let reader = try? LZ4LineReader(path: path, plainTextAccepted: true)
    else { return [:] }
    var ids: [Int: String] = [:]
    var number = 0
    var key: [UInt8] = []
    while ids.count < lines.count, let line = try? reader.nextLine() {
      number += 1
      guard lines.contains(number) else { continue }
      line.withUnsafeBytes { raw in
        var scanner = JSONScanner(raw)
        var idRange: Range<Int>? = nil
        guard
          (try? scanner.object(
            key: &key,
            { key, range in
              if key.elementsEqual("id".utf8) { idRange = range }
            })) != nil, let idRange
        else { return }
        if let id = JSONScanner.string(in: raw, at: idRange.lowerBound) {
          ids[number] = String(decoding: id, as: UTF8.self)
        }
      }
    }
    return ids
  }

  /// The rows whose delivered count changed most (by size of the change,
  /// then in id order), each with its example (`examples` of their rows);
  /// unchanged rows are never listed.
  private static func top(
    _ delivered: RowCounts, names: StringTable, examples: ([Int]) -> [Example?]
  ) -> [Change] {
    // The best `topCount` so far, best first: one pass over the rows, no
    // sort of every changed row (786k users change in a quiet-hours
    // what-if at 1M, and a sweep reports each variant).
    typealias Candidate = (k: Int, row: Int, change: Int)
    var best: [Candidate] = []
    best.reserveCapacity(topCount + 1)
    func ranksAbove(_ x: Candidate, _ y: Candidate) -> Bool {
      x.change.magnitude != y.change.magnitude
        ? x.change.magnitude > y.change.magnitude : x.row < y.row
    }
    for k in delivered.a.indices {
      let change = delivered.change(k)
      guard change != 0 else { continue }
      let candidate = (k: k, row: delivered.row(k), change: change)
      if best.count == topCount {
        guard ranksAbove(candidate, best[topCount - 1]) else { continue }
        best.removeLast()
      }
      var place = best.count
      while place > 0 && ranksAbove(candidate, best[place - 1]) { place -= 1 }
      best.insert(candidate, at: place)
    }
    let found = examples(best.map(\.row))
    return best.indices.map { i in
      let (k, row, change) = best[i]
      return Change(
        id: names[row], a: delivered.a[k], b: delivered.a[k] &+ change, example: found[i])
    }
  }

}
