import CPrefetch
import FanoutIndex
import FanoutKernel
import FanoutModel
import FanoutOutput
import FanoutReport
import FanoutTraffic

/// Running totals of a comparison, merged chunk by chunk in input order.
/// One side's totals over the run, merged from its `SideChunk`s in chunk
/// order; a B tallied relative to A holds B's minus A's until `over(_:)`
/// (its channels' counts even after).
struct SideTotals {
  var counters: Counters
  var slices = SideSlices()
  /// Delivered pairs per channel row and per user row.
  var channelDelivered: [Int]
  var userDelivered: [Int]
  /// Whether `channelDelivered` is still B's minus A's (`over(_:)`).
  private(set) var channelsAreDifference = false

  init(users: Int, channels: Int, gateways: Int) {
    counters = Counters(gateways: gateways)
    channelDelivered = [Int](repeating: 0, count: channels)
    userDelivered = [Int](repeating: 0, count: users)
  }

  mutating func add(_ side: SideChunk, channels: [Int32]) {
    counters.add(side.counters)
    slices.add(side.slices)
    // Each row is a cache miss, asked for `rowsAhead` ahead; a relative
    // side's channel counts are mostly 0, and its channels left alone.
    channelDelivered.withUnsafeMutableBufferPointer { counts in
      let delivered = side.messageDelivered
      for k in channels.indices {
        let ahead = k &+ Self.rowsAhead
        if ahead < channels.count && delivered[ahead] != 0 {
          cprefetch_read(counts.baseAddress! + Int(channels[ahead]))
        }
        if delivered[k] != 0 { counts[Int(channels[k])] &+= Int(delivered[k]) }
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
  /// but for the channels' counts: only the top channels are shown, and a
  /// whole copy per B cost 53 MB of fresh memory at 1M (6.6M channels).
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
  /// Per channel row, its first changed pair as a place in `firstChanges`
  /// + 1 (0: none): 4 bytes per channel and 16 per channel changed, where
  /// the pairs themselves per channel took 16 per channel (at 1M, 6.6M
  /// channels: 106 MB per B of a sweep).
  private var channelFirstChange: [Int32]
  private var firstChanges: [(line: Int, user: Int32)] = []

  /// Which user and channel rows have their first change: one bit each,
  /// so that the many changes after a row's first read no row of the
  /// large tables above (at 1M, 128 KB and 0.8 MB against 8 MB and 26 MB).
  private var userSeen: [UInt64]
  private var channelSeen: [UInt64]

  init(users: Int, channels: Int) {
    userFirstChange = [Int](repeating: 0, count: users)
    channelFirstChange = [Int32](repeating: 0, count: channels)
    userSeen = [UInt64](repeating: 0, count: users / 64 + 1)
    channelSeen = [UInt64](repeating: 0, count: channels / 64 + 1)
  }

  mutating func add(_ changes: PairChanges) {
    for i in transitions.indices { transitions[i] &+= changes.transitions[i] }
    changedPairs &+= changes.changedPairs
    let (users, channels) = (changes.changedUsers, changes.changedChannels)
    userFirstChange.withUnsafeMutableBufferPointer { userFirst in
      channelFirstChange.withUnsafeMutableBufferPointer { channelFirst in
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
                firstChanges.append((changes.changedLines[k], users[k]))
                // At most one per channel row, whose number fits an Int32.
                channelFirst[c] = Int32(truncatingIfNeeded: firstChanges.count)
              }
            }
          }
        }
      }
    }
  }

  /// Channel row `c`'s first changed pair: its traffic line and user row.
  func firstChange(ofChannel c: Int) -> (line: Int, user: Int32)? {
    let place = Int(channelFirstChange[c])
    return place == 0 ? nil : firstChanges[place - 1]
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
  /// Delivered pairs per channel row; per side, per user row.
  var channelDelivered: RowCounts
  var userDelivered: [[Int]]
  /// B's pairs against A's.
  var changes: ChangeTotals
  var firstTs: Int64
  var lastTs: Int64

  init(a: SideTotals, b: SideTotals, changes: ChangeTotals, firstTs: Int64, lastTs: Int64) {
    counters = [a.counters, b.counters]
    slices = SliceCounts(a: a.slices, b: b.slices)
    channelDelivered = RowCounts(
      a: a.channelDelivered, b: b.channelDelivered, bIsDifference: b.channelsAreDifference)
    userDelivered = [a.userDelivered, b.userDelivered]
    self.changes = changes
    self.firstTs = firstTs
    self.lastTs = lastTs
  }

  var messages: Int { counters[0].messages }
}

/// Delivered pairs per row (channel or user) on both sides: A's, and B's
/// whole or as its difference from A's.
struct RowCounts {
  var a: [Int]
  var b: [Int]
  var bIsDifference = false

  /// B's count minus A's for `row`.
  @inline(__always)
  func change(_ row: Int) -> Int { bIsDifference ? b[row] : b[row] &- a[row] }
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
    topChannels = Self.top(totals.channelDelivered, names: a.channels) { row in
      totals.changes.firstChange(ofChannel: row).map {
        Example(line: $0.line, user: a.users[Int($0.user)])
      }
    }
    topUsers = Self.top(
      RowCounts(a: totals.userDelivered[0], b: totals.userDelivered[1]), names: a.users
    ) { row in
      let line = totals.changes.userFirstChange[row]
      return line == 0 ? nil : Example(line: line, user: a.users[row])
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
  /// then in id order), each with its example; unchanged rows are never
  /// listed.
  private static func top(
    _ delivered: RowCounts, names: StringTable, example: (Int) -> Example?
  ) -> [Change] {
    // The best `topCount` so far, best first: one pass over the rows, no
    // sort of every changed row (786k users change in a quiet-hours
    // what-if at 1M, and a sweep reports each variant).
    var best: [(row: Int, change: Int)] = []
    best.reserveCapacity(topCount + 1)
    func ranksAbove(_ x: (row: Int, change: Int), _ y: (row: Int, change: Int)) -> Bool {
      x.change.magnitude != y.change.magnitude
        ? x.change.magnitude > y.change.magnitude : x.row < y.row
    }
    for row in delivered.a.indices {
      let candidate = (row: row, change: delivered.change(row))
      guard candidate.change != 0 else { continue }
      if best.count == topCount {
        // Rows come in id order: a tie with the last kept ranks below it.
        guard candidate.change.magnitude > best[topCount - 1].change.magnitude else { continue }
        best.removeLast()
      }
      var place = best.count
      while place > 0 && ranksAbove(candidate, best[place - 1]) { place -= 1 }
      best.insert(candidate, at: place)
    }
    return best.map {
      Change(
        id: names[$0.row], a: delivered.a[$0.row], b: delivered.a[$0.row] &+ $0.change,
        example: example($0.row))
    }
  }
}
