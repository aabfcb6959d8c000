import FanoutModel
import FanoutTestSupport
import Testing

@testable import FanoutKernel

/// Rule 8's ledger against the rule read literally: a line at ts is
/// throttled when `throttle_messages` earlier counted lines of its (user,
/// channel) lie in (ts − window, ts]; a throttled line does not count.
@Suite("ThrottlePartition: rule 8's ledger, lines in any order")
struct ThrottlePartitionTests {
  /// The verdicts by the rule's text: every earlier counted time compared.
  static func literal(_ lines: [(slot: Int32, ts: Int64)], _ throttle: AppSettings.Throttle)
    -> [Bool]
  {
    var counted: [Int32: [Int64]] = [:]
    return lines.map { line in
      let inWindow = counted[line.slot, default: []].count {
        Evaluator.countsAgainst($0, at: line.ts, window: throttle.windowMilliseconds)
      }
      guard !Evaluator.reachesLimit(Int64(inWindow), throttle) else { return false }
      counted[line.slot, default: []].append(line.ts)
      return true
    }
  }

  static func ledger(_ lines: [(slot: Int32, ts: Int64)], _ throttle: AppSettings.Throttle)
    -> [Bool]
  {
    let slots = Int(lines.map(\.slot).max() ?? 0) + 1
    let partition = ThrottlePartition(heads: .init(memberships: slots, threads: 1))
    return lines.map { partition.admit(slot: $0.slot, ts: $0.ts, throttle) }
  }

  @Test(
    "in time order, in reverse (also with equal times), shuffled, jittered; limits 1, 3, 10^9",
    arguments: ["forward", "reverse", "reverse, equal times", "shuffled", "jittered"],
    [1, 3, 1_000_000_000])
  func agreesWithTheRule(order: String, limit: Int64) {
    var random = SeededRandom(seed: 11)
    // Three slots, times a few seconds apart, so that windows hold several.
    var lines = (0..<3_000).map { i in (slot: Int32(i % 3), ts: Int64(i / 3) * 2_000) }
    switch order {
    case "reverse": lines.reverse()
    case "reverse, equal times":
      // Each slot's times twice over, newest first: a time equal to the
      // oldest counts against the line.
      lines = lines.map { ($0.slot, $0.ts / 4_000 * 4_000) }.reversed()
    case "shuffled": lines.shuffle(using: &random)
    case "jittered":
      lines = lines.map { ($0.slot, $0.ts + Int64.random(in: -5_000...5_000, using: &random)) }
    default: break
    }
    let throttle = AppSettings.Throttle(messages: limit, windowMilliseconds: 9_000)
    let verdicts = Self.ledger(lines, throttle)
    #expect(verdicts == Self.literal(lines, throttle))
    // Forward with a limit of 3: some lines are throttled (the check bites).
    if order == "forward" && limit == 3 { #expect(verdicts.contains(false)) }
  }

  @Test("a limit reached only after many lines in disorder: the lists are put in order then")
  func limitReachedLate() {
    var random = SeededRandom(seed: 12)
    let lines = (0..<3_000).map { i in (slot: Int32(i % 3), ts: Int64(i / 3) * 2_000) }
      .shuffled(using: &random)
    let throttle = AppSettings.Throttle(messages: 500, windowMilliseconds: 1 << 40)
    let verdicts = Self.ledger(lines, throttle)
    #expect(verdicts == Self.literal(lines, throttle))
    #expect(verdicts.contains(false))
  }

  @Test("retention (the stream stage): times swept as the newest moves on, verdicts unchanged")
  func retention() {
    var random = SeededRandom(seed: 13)
    // 40 slots, a line every 100 ms, each up to 4 s late: within the retention.
    let lines = (0..<40_000).map { i in
      (slot: Int32(i * 7 % 40), ts: Int64(i) * 100 + Int64.random(in: 0..<4_000, using: &random))
    }
    let throttle = AppSettings.Throttle(messages: 2, windowMilliseconds: 9_000)
    let retention: Int64 = 5_000
    let partition = ThrottlePartition(heads: .init(memberships: 40, threads: 1))
    var newest = Int64.min
    let verdicts = lines.enumerated().map { k, line in
      // As `ThrottleJudge` sweeps after each wave (a sweep waits until the pool doubles).
      if k % 500 == 0 && newest > .min {
        partition.sweep(olderThan: newest - throttle.windowMilliseconds - retention)
      }
      newest = max(newest, line.ts)
      return partition.admit(slot: line.slot, ts: line.ts, throttle)
    }
    #expect(verdicts == Self.literal(lines, throttle))
    #expect(verdicts.contains(false))
    #expect(verdicts.contains(true))
  }

  @Test("many lists keep every list whole")
  func growth() {
    let lines = (0..<20_000).map { i in (slot: Int32(i % 5_000), ts: Int64(i) * 10) }
    let throttle = AppSettings.Throttle(messages: 2, windowMilliseconds: 200_000)
    #expect(Self.ledger(lines, throttle) == Self.literal(lines, throttle))
  }

  @Test(
    "several throttles in one partition decide as each alone, lines in any order",
    arguments: ["forward", "reverse, equal times", "shuffled", "jittered"])
  func grouped(order: String) {
    var random = SeededRandom(seed: 14)
    var lines = (0..<4_000).map { i in (slot: Int32(i % 4), ts: Int64(i / 4) * 1_500) }
    switch order {
    case "reverse, equal times": lines = lines.map { ($0.slot, $0.ts / 6_000 * 6_000) }.reversed()
    case "shuffled": lines.shuffle(using: &random)
    case "jittered":
      lines = lines.map { ($0.slot, $0.ts + Int64.random(in: -8_000...8_000, using: &random)) }
    default: break
    }
    // Limits and windows apart, two alike, one a second long (it bites
    // only on lines out of order), one no line reaches.
    let throttles = [(1, 9_000), (3, 9_000), (2, 60_000), (3, 9_000), (1, 1_000), (1_000_000, 1)]
      .map { AppSettings.Throttle(messages: Int64($0.0), windowMilliseconds: Int64($0.1)) }
    let partition = ThrottlePartition(heads: .init(memberships: 4, threads: 1), grouped: true)
    let widest = throttles.map(\.windowMilliseconds).max()!
    let masks = lines.map {
      partition.admit(slot: $0.slot, ts: $0.ts, throttles: throttles, widest: widest)
    }
    for (v, throttle) in throttles.enumerated() {
      let alone = Self.literal(lines, throttle)
      #expect(masks.map { $0 & (1 << v) != 0 } == alone, "throttle \(v)")
      if v < 4 { #expect(alone.contains(false), "throttle \(v) takes some lines") }
    }
  }
}
