import FanoutTestSupport
import Foundation
import Testing

/// deploy/spark/fanout_spark.py in Spark's local mode, with the pyspark of
/// `make spark-env` (which `make test` builds first).
@Suite("the Spark driver", .serialized)
struct SparkDriverTests {
  static let python = packageRoot.path + "/.venv-spark/bin/python"
  static let driver = packageRoot.path + "/deploy/spark/fanout_spark.py"

  static let data: (snapshot: String, traffic: String) = {
    let dir = makeTemporaryDirectory()
    let r = runProcess(
      fanoutExecutable,
      ["gen", "--users", "3000", "--messages", "4000", "--seed", "11", "--v2", "--out", dir])
    if r.status != 0 { Issue.record("fanout gen: \(r.stderr)") }
    return (dir + "/snapshot.sqlite", dir + "/traffic.ndjson")
  }()

  func runDriver(_ arguments: [String]) -> ProcessResult {
    runProcess(
      Self.python,
      [Self.driver, "--fanout", fanoutExecutable, "--master", "local[2]"] + arguments)
  }

  @Test("local[2], 3 shards: the files of one fanout eval")
  func sameAsOneNode() throws {
    try #require(
      FileManager.default.fileExists(atPath: Self.python),
      "no .venv-spark: run `make spark-env` (make test does)")
    let work = makeTemporaryDirectory()
    let spark = runDriver([
      "--snapshot", Self.data.snapshot, "--messages", Self.data.traffic, "--shards", "3",
      "--out", work + "/spark", "--decisions", "--threads-per-task", "2",
    ])
    #expect(spark.status == 0, "\(spark.stderr)")
    let one = runProcess(
      fanoutExecutable,
      [
        "eval", "--snapshot", Self.data.snapshot, "--messages", Self.data.traffic, "--out",
        work + "/one", "--decisions",
      ])
    #expect(one.status == 0)
    #expect(listDirectory(work + "/one") == listDirectory(work + "/spark"))
    for name in listDirectory(work + "/one") where name != "summary.json" {
      #expect(
        FileManager.default.contents(atPath: work + "/one/" + name)
          == FileManager.default.contents(atPath: work + "/spark/" + name), "\(name)")
    }
    let counts = { (path: String) in
      readText(path + "/summary.json").split(separator: "\n").filter {
        !$0.contains("second") && !$0.contains("timings")
      }
    }
    #expect(counts(work + "/one") == counts(work + "/spark"))
    // Only the output is left beside it: the work folder is removed.
    #expect(listDirectory(work).sorted() == ["one", "spark"])
  }

  @Test("a shard whose snapshot is refused fails the job, naming the shard and the refusal")
  func refusedShard() throws {
    try #require(FileManager.default.fileExists(atPath: Self.python), "no .venv-spark")
    let work = makeTemporaryDirectory()
    let split = runProcess(
      fanoutExecutable,
      ["snapshot", "split", Self.data.snapshot, "--shards", "3", "--out", work + "/shards"])
    #expect(split.status == 0, "\(split.stderr)")
    let bad = runProcess(
      "/usr/bin/sqlite3",
      [
        work + "/shards/shard-1-of-3.sqlite",
        "INSERT INTO devices VALUES (99999999, 'ghost', 'apns', 'tok-ghost')",
      ])
    #expect(bad.status == 0, "\(bad.stderr)")
    let spark = runDriver([
      "--snapshot", Self.data.snapshot, "--messages", Self.data.traffic, "--shards", "3",
      "--shards-dir", work + "/shards", "--out", work + "/spark", "--work", work + "/tasks",
    ])
    #expect(spark.status == 65, "\(spark.stderr)")
    #expect(spark.stderr.contains("shard 1 of 3 failed (exit 65)"), "\(spark.stderr)")
    #expect(spark.stderr.contains("ghost"), "\(spark.stderr)")
    #expect(!FileManager.default.fileExists(atPath: work + "/spark"))
  }
}
