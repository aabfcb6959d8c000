import FanoutTestSupport
import Foundation
import Testing

@Suite("fanout gen")
struct GenCommandTests {
  @Test("the same seed gives the same files; the result loads and evaluates with no rejection")
  func deterministicAndValid() throws {
    var traffic: [Data] = []
    var dirs: [String] = []
    for _ in 0..<2 {
      let dir = makeTemporaryDirectory()
      let result = runProcess(
        fanoutExecutable,
        ["gen", "--users", "3000", "--messages", "4000", "--seed", "7", "--out", dir])
      #expect(result.status == 0, "\(result.stderr)")
      traffic.append(FileManager.default.contents(atPath: dir + "/traffic.ndjson")!)
      dirs.append(dir)
    }
    #expect(traffic[0] == traffic[1])
    let dump = { (dir: String) in
      runProcess("/usr/bin/sqlite3", [dir + "/snapshot.sqlite", ".dump"]).stdout
    }
    #expect(dump(dirs[0]) == dump(dirs[1]))

    let out = dirs[0] + "/out"
    let eval = runProcess(
      fanoutExecutable,
      [
        "eval", "--snapshot", dirs[0] + "/snapshot.sqlite", "--messages",
        dirs[0] + "/traffic.ndjson", "--out", out,
      ])
    #expect(eval.status == 0, "\(eval.stderr)")
    let summary =
      try JSONSerialization.jsonObject(
        with: Data(contentsOf: URL(fileURLWithPath: out + "/summary.json"))) as! [String: Any]
    #expect(summary["messages"] as? Int == 4000)
    #expect(summary["rejected"] as? Int == 0)
    // Every rule is exercised by the generated data.
    let suppressed = summary["suppressed"] as! [String: Int]
    for reason in ["snoozed", "dnd", "muted", "not_mentioned", "opted_out"] {
      #expect((suppressed[reason] ?? 0) > 0, "no \(reason)")
    }
    let other = runProcess(
      fanoutExecutable,
      ["gen", "--users", "3000", "--messages", "4000", "--seed", "8", "--out", dirs[1]])
    #expect(other.status == 0)
    #expect(FileManager.default.contents(atPath: dirs[1] + "/traffic.ndjson")! != traffic[0])
  }
}
