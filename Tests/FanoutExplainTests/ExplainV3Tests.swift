import FanoutExplain
import FanoutGenerator
import FanoutPipeline
import FanoutTestSupport
import Foundation
import Testing

/// `explain --messages FILE --id M` narrates a pair's notification (contract
/// v3) as `fanout eval` numbers it, and the read line that removed it.
@Suite("explain: contract v3 notifications")
struct ExplainV3Tests {
  @Test(
    "the group, id, badge and hides of eval's decision line; the read that removed it, as in updates.ndjson"
  )
  func agreesWithEval() throws {
    let dir = makeTemporaryDirectory("fanout-explain-v3")
    var options = GeneratorOptions(users: 400, messages: 800, seed: 21, profile: .chat, out: dir)
    options.v3 = true
    let data = try Generator.run(options)
    let out = dir + "/eval"
    _ = try Pipeline.eval(
      EvalOptions(
        snapshot: data.snapshotPath, messages: data.trafficPath, out: out, decisions: true,
        threads: 2))
    func lines(_ name: String) throws -> [[String: Any]] {
      let bytes = try #require(
        decodeLZ4Frames(Array(try Data(contentsOf: URL(fileURLWithPath: out + "/" + name)))))
      return try bytes.split(separator: UInt8(ascii: "\n")).map {
        try JSONSerialization.jsonObject(with: Data($0)) as! [String: Any]
      }
    }
    // user → notification id → (read line, cancelled)
    var removals: [String: [Int: (line: Int, cancelled: Bool)]] = [:]
    for update in try lines("updates.ndjson.lz4") {
      let user = update["user"] as! String
      let cancelled = Set(update["cancelled"] as! [Int])
      for id in update["removed"] as! [Int] {
        removals[user, default: [:]][id] = (update["line"] as! Int, cancelled.contains(id))
      }
    }
    let delivered = try lines("decisions.ndjson.lz4").filter { $0["deliver"] as! Bool }
    let explainer = try Explainer(snapshot: data.snapshotPath)
    var removed = 0
    var hid = 0
    // Every 7th delivered pair: enough to meet hides, removals and cancellations.
    for (k, decision) in delivered.enumerated() where k % 7 == 0 {
      let user = decision["user"] as! String
      let e = try explainer.explain(
        messagesAt: data.trafficPath, id: decision["message"] as! String, user: user)
      let n = try #require(e.notification)
      #expect(n.group == Int64(decision["group"] as! Int))
      #expect(n.id == Int64(decision["notification"] as! Int))
      #expect(n.badge == Int64(decision["badge"] as! Int))
      #expect(n.hid == ((decision["hide"] as? [Int]) ?? []).map(Int64.init))
      let expected = removals[user]?[decision["notification"] as! Int]
      #expect(n.removedBy?.line == expected?.line)
      #expect(n.removedBy?.cancelled == expected?.cancelled)
      if expected != nil { removed += 1 }
      if !n.hid.isEmpty { hid += 1 }
      #expect(e.text().contains("notification (contract v3): group \(n.group)"))
    }
    #expect(removed > 3 && hid > 3, "\(removed) removed, \(hid) hiding")
  }

  /// Ids may repeat, across kinds of line too: `--id M` names a message,
  /// and a read line with the same id, before it, is passed over.
  @Test("--id finds the message, not an earlier read line with its id")
  func readLineSharingTheID() throws {
    let snapshot = SQLiteFixture.make(
      readText(datasetURL("sample-v3/snapshot.sql").path), schema: SQLiteFixture.v2Schema)
    let traffic = makeTemporaryDirectory() + "/traffic.ndjson"
    try """
    {"id":"m1","event":"read","channel":"team","user":"ana","ts":1773046700000}
    {"id":"m1","channel":"team","sender":"bo","ts":1773046800000}
    {"id":"r1","event":"read","channel":"team","user":"ana","ts":1773046860000}

    """.write(toFile: traffic, atomically: false, encoding: .utf8)
    let e = try Explainer(snapshot: snapshot).explain(messagesAt: traffic, id: "m1", user: "ana")
    #expect(e.message.line == 2)
    #expect(e.outcome?.isDelivered == true)
    // Its notification, and the later read (line 3) that removed it.
    let n = try #require(e.notification)
    #expect(n.id == 1 && n.removedBy?.line == 3)
  }
}
