import FanoutExplain
import FanoutGenerator
import FanoutModel
import FanoutPipeline
import FanoutTestSupport
import FanoutTraffic
import Foundation
import Testing

/// What `fanout eval` wrote: each pair's outcome in output order, and every
/// delivery as `message/user/device`.
private struct EvalOutput {
  var decisions: [(message: String, user: String, outcome: String)] = []
  var deliveries: [String] = []

  init(snapshot: String, messages: String) throws {
    let out = makeTemporaryDirectory() + "/eval"
    let report = try Pipeline.eval(
      EvalOptions(snapshot: snapshot, messages: messages, out: out, decisions: true, threads: 2))
    for name in listDirectory(out) where name.hasSuffix(".ndjson.lz4") {
      let bytes = try #require(
        decodeLZ4Frames(Array(try Data(contentsOf: URL(fileURLWithPath: out + "/" + name)))))
      for line in bytes.split(separator: UInt8(ascii: "\n")) {
        let object = try JSONSerialization.jsonObject(with: Data(line)) as! [String: Any]
        if name == "decisions.ndjson.lz4" {
          decisions.append(
            (
              object["message"] as! String, object["user"] as! String,
              (object["trigger"] ?? object["reason"]) as! String
            ))
        } else {
          for r in object["recipients"] as! [[String: Any]] {
            deliveries.append("\(object["message"]!)/\(r["user"]!)/\(r["device"]!)")
          }
        }
      }
    }
    #expect(decisions.count == report.counters.pairs)
  }
}

/// Explains every (message, member) pair of `messages` and checks the
/// decision and the devices against `fanout eval`, pair by pair.
private func checkEveryPair(snapshot: String, messages: String) throws -> Int {
  let eval = try EvalOutput(snapshot: snapshot, messages: messages)
  let explainer = try Explainer(snapshot: snapshot)
  let index = explainer.index
  let lines = readText(messages).split(separator: "\n", omittingEmptySubsequences: false)
  var parser = TrafficParser(index: index)
  for (i, line) in lines.enumerated() {
    let bytes = Array(line.utf8)
    bytes.withUnsafeBytes { parser.parse($0, line: i + 1) }
  }
  let batch = parser.finish()
  var next = 0
  var deliveries: [String] = []
  var mismatches: [String] = []
  // Rule 8: per "user channel", the earlier lines' deliveries, in order.
  var histories: [String: ThrottleHistory] = [:]
  for m in 0..<batch.count {
    let text = String(lines[batch.lines[m] - 1])
    for u in index.members(of: batch.channel[m]) where u != batch.sender[m] {
      let key = "\(u) \(batch.channel[m])"
      let e = try explainer.explain(
        batch, m, text: text, user: index.users[Int(u)],
        history: histories[key, default: ThrottleHistory()])
      histories[key, default: ThrottleHistory()].record(e)
      let expected = eval.decisions[next]
      next += 1
      if e.pair != .evaluated || e.message.id != expected.message || e.user != expected.user
        || e.outcome?.name != expected.outcome
      {
        mismatches.append("\(expected) vs \(e.user): \(e.verdict)")
      }
      if e.outcome?.isDelivered == true {
        deliveries += e.passingDevices.map { "\(e.message.id)/\(e.user)/\($0.id)" }
      }
    }
  }
  #expect(next == eval.decisions.count)
  #expect(mismatches.isEmpty, "\(mismatches.count) pairs differ, e.g. \(mismatches.prefix(5))")
  let expected = eval.deliveries.sorted()
  deliveries.sort()
  #expect(
    deliveries == expected,
    "\(deliveries.count) deliveries vs \(expected.count): explain only \(Set(deliveries).subtracting(expected).sorted().prefix(5)), eval only \(Set(expected).subtracting(deliveries).sorted().prefix(5))"
  )
  return next
}

@Suite("fanout explain agrees with fanout eval on every pair")
struct ExplainAgreesWithEvalTests {
  @Test("the sample")
  func sample() throws {
    let snapshot = SQLiteFixture.make(readText(datasetURL("sample/snapshot.sql").path))
    let pairs = try checkEveryPair(
      snapshot: snapshot, messages: datasetURL("sample/traffic.ndjson").path)
    #expect(pairs > 50)
  }

  @Test("the contract v2 sample: every v2 rule, throttle and deferral included")
  func sampleV2() throws {
    let snapshot = SQLiteFixture.make(
      readText(datasetURL("sample-v2/snapshot.sql").path), schema: SQLiteFixture.v2Schema)
    let messages = datasetURL("sample-v2/traffic.ndjson").path
    #expect(try checkEveryPair(snapshot: snapshot, messages: messages) == 29)
    let out = makeTemporaryDirectory() + "/eval"
    let report = try Pipeline.eval(EvalOptions(snapshot: snapshot, messages: messages, out: out))
    for reason in [Reason.silent, .senderMuted, .dnd, .muted, .active, .throttled] {
      #expect(report.counters.suppressed[Int(reason.rawValue)] > 0, "no \(reason)")
    }
    #expect(report.counters.deferred == 3)
  }

  @Test(
    "random worlds (every rule, edge minutes, DST; v2 worlds too)",
    arguments: [(UInt64(3), false), (7, false), (11, false), (103, true), (107, true), (111, true)])
  func randomWorld(_ seed: UInt64, v2: Bool) throws {
    let world = RandomWorld(seed: seed, users: 30, messages: 150, v2: v2)
    let snapshot = world.makeSnapshot()
    let messages = makeTemporaryDirectory() + "/traffic.ndjson"
    try world.messages.joined(separator: "\n").write(
      toFile: messages, atomically: true, encoding: .utf8)
    #expect(try checkEveryPair(snapshot: snapshot, messages: messages) > 500)
  }

  @Test("generated data, v1 and v2", arguments: [false, true])
  func generated(v2: Bool) throws {
    let out = makeTemporaryDirectory("fanout-gen")
    let report = try Generator.run(
      GeneratorOptions(users: 400, messages: 600, seed: 5, profile: .chat, out: out, v2: v2))
    let pairs = try checkEveryPair(snapshot: report.snapshotPath, messages: report.trafficPath)
    #expect(pairs > 1000, "\(pairs) pairs")
  }
}
