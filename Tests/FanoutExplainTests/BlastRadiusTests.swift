import FanoutExplain
import FanoutGenerator
import FanoutPipeline
import FanoutTestSupport
import Foundation
import Testing

/// `fanout explain` without `--user`: the counts and pairs of `fanout eval`
/// on that one line.
@Suite("explain: the blast radius of one message")
struct BlastRadiusTests {
  /// Eval of a traffic file of `line` alone: summary and decision lines.
  static func evalOne(_ snapshot: String, _ line: String) throws -> (
    summary: [String: Any], decisions: [[String: Any]]
  ) {
    let dir = makeTemporaryDirectory("fanout-radius")
    try (line + "\n").write(toFile: dir + "/t.ndjson", atomically: true, encoding: .utf8)
    var options = EvalOptions(
      snapshot: snapshot, messages: dir + "/t.ndjson", out: dir + "/out", decisions: true)
    options.indexCache = nil
    _ = try Pipeline.eval(options)
    let summary =
      try JSONSerialization.jsonObject(
        with: FileManager.default.contents(atPath: dir + "/out/summary.json")!) as! [String: Any]
    let bytes = decodeLZ4Frames(
      Array(FileManager.default.contents(atPath: dir + "/out/decisions.ndjson.lz4")!))!
    let decisions = bytes.split(separator: UInt8(ascii: "\n")).map {
      try! JSONSerialization.jsonObject(with: Data($0)) as! [String: Any]
    }
    return (summary, decisions)
  }

  static func check(_ snapshot: String, lines: [String]) throws -> Int {
    let explainer = try Explainer(snapshot: snapshot)
    var pairs = 0
    for line in lines {
      let radius = try explainer.blastRadius(line: line)
      let json =
        try JSONSerialization.jsonObject(
          with: Data(radius.json(users: true).rendered().utf8)) as! [String: Any]
      let eval = try Self.evalOne(snapshot, line)
      for key in ["pairs", "delivered", "deferred"] {
        #expect(json[key] as? Int == eval.summary[key] as? Int, "\(key): \(line)")
      }
      #expect(
        json["deliveries"] as? NSDictionary == eval.summary["deliveries"] as? NSDictionary,
        "\(line)")
      #expect(
        json["suppressed"] as? NSDictionary == eval.summary["suppressed"] as? NSDictionary,
        "\(line)")
      // Pair by pair: the outcome and the delivery time.
      let listed = (json["pairs_list"] as! [[String: Any]]).map {
        "\($0["user"]!) \($0["trigger"] ?? $0["reason"]!) \($0["deliver_at"] ?? "-")"
      }
      let decided = eval.decisions.map {
        "\($0["user"]!) \($0["trigger"] ?? $0["reason"]!) \($0["deliver_at"] ?? "-")"
      }
      #expect(listed == decided, "\(line)")
      if let badges = json["badges"] as? [String: Int] {
        #expect(badges["1"] == eval.decisions.filter { $0["badge"] as? Int == 1 }.count)
      }
      pairs += radius.pairs
    }
    return pairs
  }

  @Test("every message of the v2 sample")
  func sample() throws {
    let snapshot = SQLiteFixture.make(
      readText(datasetURL("sample-v2/snapshot.sql").path), schema: SQLiteFixture.v2Schema)
    let lines = readText(datasetURL("sample-v2/traffic.ndjson").path).split(separator: "\n")
      .map(String.init)
    #expect(try Self.check(snapshot, lines: lines) > 20)
  }

  @Test("generated v3 data, large channels among them")
  func generated() throws {
    let dir = makeTemporaryDirectory("fanout-radius-gen")
    var options = GeneratorOptions(
      users: 3000, messages: 3000, seed: 4, profile: .broadcast, out: dir)
    options.v3 = true
    let data = try Generator.run(options)
    let lines = readText(data.trafficPath).split(separator: "\n").map(String.init)
      .filter { !$0.contains(#""event":"read""#) }
    #expect(try Self.check(data.snapshotPath, lines: Array(lines.prefix(40))) > 10_000)
  }
}
