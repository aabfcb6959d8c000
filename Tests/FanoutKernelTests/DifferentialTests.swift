import FanoutTestSupport
import Testing

@Suite("Kernel against a plain reference evaluator")
struct DifferentialTests {
  @Test("random worlds: every decision and every delivery agree", arguments: Array(UInt64(1)...12))
  func randomWorld(_ seed: UInt64) throws {
    let world = RandomWorld(seed: seed)
    let scenario = try Scenario(world.sql, messages: world.messages)
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
  }
}
