import FanoutGenerator
import FanoutIndex
import FanoutKernel
import FanoutModel
import FanoutPipeline
import FanoutSnapshot
import FanoutTestSupport
import FanoutTraffic
import Foundation
import Testing

/// Counting through channel shares (`--summary-only`) must give exactly the
/// counters of pair-by-pair evaluation, however messages cluster in time.
@Suite("Counting through channel shares")
struct ChannelShareTests {
  /// Counters of `batch`, pair by pair (with delivery lines, as `fanout eval`
  /// does) or counting through the shares of channels of `shareFrom` members
  /// or more; and how many times a channel's timed members were grouped.
  static func counters(
    _ index: Index, _ batch: MessageBatch, shareFrom: Int? = nil
  ) -> (Counters, minutes: Int) {
    let evaluator =
      shareFrom.map { Evaluator(index: index, output: .counts, shareChannelsFrom: $0) }
      ?? Evaluator(index: index, output: .deliveries)
    // When the world throttles, the shared count must single out the
    // throttled members as the pair loop does.
    let throttled = throttledMembers(batch, index: index)
    var result = ChunkResult(gateways: index.gateways.count)
    evaluator.evaluate(batch, messages: 0..<batch.count, throttled: throttled, into: &result)
    return (result.counters, evaluator.minutesGrouped)
  }

  /// Instants where answers change: snooze bounds (and a millisecond either
  /// side) and the US switch to daylight saving time; Kolkata's offset of
  /// +05:21:10 in 1900 and its change to +05:30 at 18:38:50 UTC on
  /// 1905-12-31, where local minutes do not start with UTC ones.
  static func edges(_ world: RandomWorld) -> [Int64] {
    let prefs =
      world.users.map(\.prefs) + Array(world.scopePrefs.values)
      + Array(world.channelPrefs.values)
    let bounds = prefs.flatMap { [$0.snoozeStart, $0.snoozeUntil].compactMap { $0 } }
    let usSwitch: Int64 = 1_772_953_200_000  // 2026-03-08T07:00:00Z
    let kolkata: [Int64] = [-2_195_899_200_000, -2_019_705_670_000]
    return (bounds + [usSwitch] + kolkata).flatMap { [$0 - 1, $0, $0 + 1] }
  }

  @Test(
    "random worlds, every channel shared, messages clustered on rule edges",
    arguments: Array(UInt64(1)...8).map { ($0, false) }
      + Array(UInt64(201)...206).map { ($0, true) })
  func randomWorld(_ seed: UInt64, v2: Bool) throws {
    let world = RandomWorld(seed: seed, users: 60, messages: 3000, v2: v2)
    let scenario = try Scenario(world: world)
    var batch = scenario.batch
    #expect(batch.count == 3000)
    // Twelve runs of 250 messages, each within a millisecond or a minute of
    // one edge, on both sides of it (the world's own message times sit on
    // local minutes where DND windows start and end).
    var random = SeededRandom(seed: seed)
    let edges = Self.edges(world)
    let anchors =
      Array(edges.suffix(6).shuffled(using: &random).prefix(2))
      + Array(edges.dropLast(6).shuffled(using: &random).prefix(4)) + Array(batch.ts.prefix(6))
    let nearby: [Int64] = [-60_000, -1, 0, 1, 999, 59_999]
    for m in 0..<batch.count {
      batch.ts[m] = anchors[m / 250] + nearby.randomElement(using: &random)!
    }
    // In time order within a run, as traffic comes.
    for run in stride(from: 0, to: batch.count, by: 250) { batch.ts[run..<(run + 250)].sort() }
    let (pairByPair, _) = Self.counters(scenario.index, batch)
    let (shared, minutes) = Self.counters(scenario.index, batch, shareFrom: 1)
    #expect(shared == pairByPair, "seed \(seed)")

    // Shares served several messages per minute.
    #expect(minutes < batch.count / 4, "seed \(seed): \(minutes) minutes grouped")
  }

  @Test(
    "v2 worlds that share (no deferral, no presence) with a throttle: the throttled members singled out",
    arguments: Array(UInt64(211)...214))
  func throttledShares(_ seed: UInt64) throws {
    var world = RandomWorld(seed: seed, users: 60, messages: 1500, v2: true)
    world.quietAction = [:]
    world.defaultQuietAction = nil
    world.presenceAction = nil
    world.throttle = (Int(seed % 3) + 1, 86_400_000)
    let scenario = try Scenario(world: world)
    let (pairByPair, _) = Self.counters(scenario.index, scenario.batch)
    let (shared, minutes) = Self.counters(scenario.index, scenario.batch, shareFrom: 1)
    #expect(shared == pairByPair, "seed \(seed)")
    #expect(minutes > 0, "shares were used")
    #expect(pairByPair.suppressed[Int(Reason.throttled.rawValue)] > 100)
  }

  @Test("generated broadcast traffic squeezed into minutes: kernel and fanout eval --summary-only")
  func generatedBroadcast() throws {
    let directory = makeTemporaryDirectory("fanout-shared")
    defer { try? FileManager.default.removeItem(atPath: directory) }
    _ = try Generator.run(
      GeneratorOptions(
        users: 12_000, messages: 600, seed: 5, profile: .broadcast, out: directory))
    // The day squeezed into a minute and a half, so that many messages share
    // a channel and minute (lines with RFC 3339 times are left out).
    let pattern = try NSRegularExpression(pattern: #""ts":(\d+)"#)
    let day: Int64 = 1_772_928_000_000  // 2026-03-08T00:00:00Z, the generator's day
    let lines = readText(directory + "/traffic.ndjson").split(separator: "\n").compactMap {
      line -> String? in
      let text = String(line)
      guard let match = pattern.firstMatch(in: text, range: NSRange(text.startIndex..., in: text)),
        let range = Range(match.range(at: 1), in: text), let ts = Int64(text[range])
      else { return nil }
      return text.replacingCharacters(in: range, with: String(day + (ts - day) / 1_000))
    }
    let traffic = directory + "/squeezed.ndjson"
    try lines.joined(separator: "\n").write(toFile: traffic, atomically: true, encoding: .utf8)

    let snapshot = directory + "/snapshot.sqlite"
    let index = try SnapshotLoader.load(path: snapshot).index
    let batch = parseTraffic(lines, index: index)
    #expect(batch.rejections.isEmpty)
    let (pairByPair, _) = Self.counters(index, batch)
    let (shared, minutes) = Self.counters(
      index, batch, shareFrom: Evaluator.defaultSharingThreshold)
    #expect(shared == pairByPair)
    #expect(pairByPair.pairs > 1_000_000)
    #expect(minutes > 0 && minutes < batch.count / 20, "\(minutes) minutes grouped")

    // Through the pipeline: planned chunks, one evaluator per worker thread.
    for threads in [1, 2] {
      let report = try Pipeline.eval(
        EvalOptions(
          snapshot: snapshot, messages: traffic, out: directory + "/out", summaryOnly: true,
          threads: threads, overwrite: true))
      #expect(report.counters == pairByPair, "\(threads) threads")
    }
  }
}
