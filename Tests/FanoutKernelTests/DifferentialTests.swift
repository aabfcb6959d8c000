import FanoutTestSupport
import Testing

@Suite("Kernel against a plain reference evaluator")
struct DifferentialTests {
  @Test(
    "random worlds: every decision and every delivery agree",
    arguments: differentialSeeds(UInt64(1)...12))
  func randomWorld(_ seed: UInt64) throws {
    try check(RandomWorld(seed: seed), seed)
  }

  @Test(
    "random contract v2 worlds (mutes, silent, threads, size and kind defaults, @all switches)",
    arguments: differentialSeeds(Self.v2Seeds))
  func randomV2World(_ seed: UInt64) throws {
    let world = RandomWorld(seed: seed, v2: true)
    try check(world, seed)
    // The world reaches the new rules.
    guard Self.v2Seeds.contains(seed) else { return }
    let outcomes = Set(ReferenceEvaluator(world).decisions().values)
    #expect(outcomes.isSuperset(of: ["-silent", "-sender_muted", "mention"]), "seed \(seed)")
  }

  static let v2Seeds = UInt64(101)...116

  @Test("the v2 worlds reach deferral, presence (suppressing and delaying) and the throttle")
  func v2Coverage() {
    var deferred = 0
    var active = 0
    var throttled = 0
    var throttledInTimeDisorder = 0
    var delayedWorlds = 0
    for seed in Self.v2Seeds {
      let world = RandomWorld(seed: seed, v2: true)
      let outcomes = ReferenceEvaluator(world).decisions().values
      deferred += outcomes.filter { $0.contains("@") }.count
      active += outcomes.filter { $0 == "-active" }.count
      throttled += outcomes.filter { $0 == "-throttled" }.count
      if let throttle = world.throttle, throttle.window >= 86_400_000 {
        throttledInTimeDisorder += outcomes.filter { $0 == "-throttled" }.count
      }
      if world.presenceAction == "delay" && outcomes.contains(where: { $0.contains("@") }) {
        delayedWorlds += 1
      }
    }
    #expect(deferred > 100, "\(deferred) deferred pairs")
    #expect(active > 20, "\(active) active pairs")
    #expect(delayedWorlds > 2)
    // Windows of a day or more over a week of lines in no time order: the
    // throttle counts earlier lines that are later in time, and not later
    // lines that are earlier.
    #expect(throttled > 100, "\(throttled) throttled pairs")
    #expect(throttledInTimeDisorder > 20, "\(throttledInTimeDisorder)")
  }

  private func check(_ world: RandomWorld, _ seed: UInt64) throws {
    let scenario = try Scenario(world: world)
    #expect(scenario.batch.rejections.isEmpty)
    let reference = ReferenceEvaluator(world)
    let expected = reference.decisions()
    let actual = scenario.decisions
    #expect(actual.count == expected.count)
    let differing = expected.keys.sorted().filter { actual[$0] != expected[$0] }
    #expect(
      differing.isEmpty,
      "seed \(seed): \(differing.prefix(5).map { "\($0): \(actual[$0] ?? "nil") vs \(expected[$0]!)" })"
    )

    var deliveries: [String: [String]] = [:]
    for gateway in ["apns", "fcm", "email", "webpush"] {
      for line in scenario.deliveries(gateway) {
        deliveries["\(line["message"]!)/\(gateway)"] = (line["recipients"] as! [[String: Any]]).map
        {
          "\($0["user"]!):\($0["device"]!)"
        }
      }
    }
    #expect(deliveries == reference.deliveries(), "seed \(seed)")

    // Where a throttle runs, the lines written from the pass before it
    // are the evaluation's, byte for byte, and so are the counts, with
    // decision lines, delivery lines alone, or no lines.
    if let all = scenario.fromPass(.deliveriesAndDecisions),
      let lines = scenario.fromPass(.deliveries), let counts = scenario.fromPass(.counts)
    {
      #expect(all.decisionLines == scenario.result.decisionLines, "seed \(seed)")
      #expect(all.gatewayLines == scenario.result.gatewayLines, "seed \(seed)")
      #expect(all.counters == scenario.result.counters, "seed \(seed)")
      #expect(lines.gatewayLines == scenario.result.gatewayLines, "seed \(seed)")
      #expect(lines.counters == scenario.result.counters, "seed \(seed)")
      #expect(counts.counters == scenario.result.counters, "seed \(seed)")
    }
  }
}
