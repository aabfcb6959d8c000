import FanoutTestSupport
import Foundation
import Testing

/// The sample snapshot, built from `datasets/` into a real SQLite file.
private let sampleSnapshot = SQLiteFixture.make(readText(datasetURL("sample/snapshot.sql").path))
private let sampleTraffic = datasetURL("sample/traffic.ndjson").path

/// summary.json without the fields that vary from run to run.
private func summaryCounts(_ dir: String) -> NSDictionary {
  let data = FileManager.default.contents(atPath: dir + "/summary.json")!
  let object = try! JSONSerialization.jsonObject(with: data) as! [String: Any]
  return object.filter { !["seconds", "pairs_per_second", "timings"].contains($0.key) }
    as NSDictionary
}

private func eval(
  _ extra: [String], out: String, messages: String = sampleTraffic, input: [UInt8]? = nil
)
  -> ProcessResult
{
  runProcess(
    fanoutExecutable,
    ["eval", "--snapshot", sampleSnapshot, "--messages", messages, "--out", out] + extra,
    input: input)
}

@Suite("fanout eval, end to end")
struct EvalCommandTests {
  @Test("the sample's decoded output equals the golden files")
  func golden() throws {
    let out = makeTemporaryDirectory() + "/out"
    let result = eval(["--decisions", "--threads", "2"], out: out)
    #expect(result.status == 0, "\(result.stderr)")
    let expected = datasetURL("sample/expected").path
    let lz4Files = listDirectory(out).filter { $0.hasSuffix(".lz4") }
    #expect(
      lz4Files == [
        "apns.ndjson.lz4", "decisions.ndjson.lz4", "email.ndjson.lz4", "fcm.ndjson.lz4",
        "webpush.ndjson.lz4",
      ])
    for file in lz4Files {
      let decoded = lz4CommandLineDecode(out + "/" + file)
      #expect(
        decoded == readText(expected + "/" + file.replacingOccurrences(of: ".lz4", with: "")),
        "\(file)")
    }
    #expect(readText(out + "/rejected.ndjson") == readText(expected + "/rejected.ndjson"))
    let golden = try JSONSerialization.jsonObject(
      with: Data(contentsOf: URL(fileURLWithPath: expected + "/summary-counts.json")))
    #expect(summaryCounts(out) == golden as! NSDictionary)
  }

  @Test("summary.json times each phase, counts the run's CPU and the cores each phase kept busy")
  func timings() throws {
    let out = makeTemporaryDirectory() + "/out"
    #expect(eval(["--threads", "2"], out: out).status == 0)
    let data = try #require(FileManager.default.contents(atPath: out + "/summary.json"))
    let summary = try #require(try JSONSerialization.jsonObject(with: data) as? [String: Any])
    let seconds = try #require(summary["seconds"] as? Double)
    let timings = try #require(summary["timings"] as? [String: Any])
    let phases = ["load", "parse", "evaluate", "write"]
    #expect(Set(timings.keys) == Set(phases + ["cpu_user", "cpu_system", "cores"]))
    let times = timings.compactMapValues { $0 as? Double }
    #expect(times.count == 6 && times.values.allSatisfy { $0 >= 0 })
    let cpu = times["cpu_user", default: 0] + times["cpu_system", default: 0]
    let processors = Double(ProcessInfo.processInfo.activeProcessorCount)
    // The load alone takes CPU; no more than every core for the whole run
    // (with a clock tick of slack).
    #expect(cpu > 0)
    #expect(cpu <= seconds * processors + 0.02)
    // Per phase, its CPU over its time: the phases' CPU is part of the
    // run's (each figure rounded to hundredths of a core).
    let cores = try #require(timings["cores"] as? [String: Double])
    #expect(Set(cores.keys) == Set(phases))
    #expect(cores.values.allSatisfy { $0 >= 0 && $0 <= processors + 0.01 })
    #expect(cores["load", default: 0] > 0)
    let phasesCPU = phases.reduce(0.0) { $0 + cores[$1, default: 0] * times[$1, default: 0] }
    #expect(phasesCPU > 0)
    #expect(phasesCPU <= cpu + 0.005 * seconds * 4 + 0.02)
  }

  @Test("the printed schema (v2 additions included) builds the sample, as make demo does")
  func printedSchema() throws {
    let schema = runProcess(fanoutExecutable, ["snapshot", "schema"])
    #expect(schema.status == 0)
    let snapshot = SQLiteFixture.make(
      readText(datasetURL("sample/snapshot.sql").path),
      schema: String(decoding: schema.stdout, as: UTF8.self))
    let check = runProcess(fanoutExecutable, ["snapshot", "check", snapshot])
    #expect(check.status == 0, "\(check.stderr)")
    #expect(String(decoding: check.stdout, as: UTF8.self).contains("users: 16"))
  }

  @Test("the same bytes with 1, 2 and 7 threads")
  func deterministic() throws {
    // Enough traffic for several parse and evaluation chunks.
    let lines = readText(sampleTraffic).split(separator: "\n", omittingEmptySubsequences: false)
    var big: [String] = []
    for i in 0..<3_000 {
      big.append(
        String(lines[i % lines.count]).replacingOccurrences(
          of: "\"id\":\"m", with: "\"id\":\"r\(i)-m"))
    }
    let traffic = makeTemporaryDirectory() + "/traffic.ndjson"
    try big.joined(separator: "\n").write(toFile: traffic, atomically: true, encoding: .utf8)
    var outputs: [[String: Data]] = []
    for threads in [1, 2, 7] {
      let out = makeTemporaryDirectory() + "/out"
      let result = eval(["--decisions", "--threads", String(threads)], out: out, messages: traffic)
      #expect(result.status == 0, "\(result.stderr)")
      var files: [String: Data] = [:]
      for name in listDirectory(out) where name != "summary.json" {
        files[name] = FileManager.default.contents(atPath: out + "/" + name)
      }
      files["summary-counts"] = try JSONSerialization.data(
        withJSONObject: summaryCounts(out), options: .sortedKeys)
      outputs.append(files)
    }
    #expect(outputs[0].count == 7)
    #expect(outputs[0] == outputs[1])
    #expect(outputs[0] == outputs[2])
  }

  @Test("rejected lines are said on stderr with the first reason and the file; --max-rejected")
  func rejectedLines() throws {
    // The sample rejects 6 of its 21 lines (blank ones included).
    let out = makeTemporaryDirectory() + "/out"
    let told = eval([], out: out)
    #expect(told.status == 0)
    #expect(
      told.stderr.contains("6 of 21 traffic lines rejected (the first, line 7: "), "\(told.stderr)")
    #expect(told.stderr.contains(out + "/rejected.ndjson"), "\(told.stderr)")
    #expect(!told.stderr.contains("warning"))

    for (limit, status) in [("6", 0), ("5", 65), ("29%", 0), ("28%", 65), ("0", 65)] {
      let out = makeTemporaryDirectory() + "/out"
      let run = eval(["--max-rejected", limit], out: out)
      #expect(run.status == Int32(status), "\(limit): \(run.stderr)")
      if status != 0 {
        #expect(run.stderr.contains("more than --max-rejected"), "\(run.stderr)")
        #expect(!FileManager.default.fileExists(atPath: out), "\(limit): files were left")
      }
    }
    #expect(eval(["--max-rejected", "x"], out: makeTemporaryDirectory() + "/o").status == 64)

    // Not traffic at all: exit 0 (the contract's), but said, with a warning.
    let garbage = eval(
      [], out: makeTemporaryDirectory() + "/out", messages: packageRoot.path + "/Package.swift")
    #expect(garbage.status == 0)
    #expect(
      garbage.stderr.contains("rejected (the first, line 1: invalid JSON"), "\(garbage.stderr)")
    #expect(garbage.stderr.contains("warning: no traffic line was evaluated"), "\(garbage.stderr)")
  }

  @Test("messages from standard input")
  func standardInput() {
    let out = makeTemporaryDirectory() + "/out"
    let result = eval([], out: out, messages: "-", input: Array(readText(sampleTraffic).utf8))
    #expect(result.status == 0)
    #expect(summaryCounts(out)["messages"] as? Int == 14)
    #expect(result.text.contains("14 messages, 6 rejected, 153 pairs"))
  }

  @Test("a refused snapshot exits 65 and leaves nothing in the output folder")
  func refusedSnapshot() {
    let bad = SQLiteFixture.make(
      "INSERT INTO users (user_id, timezone) VALUES ('u', 'Nowhere/Land');")
    let parent = makeTemporaryDirectory()
    let result = runProcess(
      fanoutExecutable,
      ["eval", "--snapshot", bad, "--messages", sampleTraffic, "--out", parent + "/out"])
    #expect(result.status == 65)
    #expect(result.stderr.contains("table users, row user_id='u', column timezone"))
    #expect(listDirectory(parent).isEmpty)
    // With --overwrite, a previous run's files are gone too: no stale result looks current.
    let previous = makeTemporaryDirectory()
    #expect(eval([], out: previous).status == 0)
    let again = runProcess(
      fanoutExecutable,
      ["eval", "--snapshot", bad, "--messages", sampleTraffic, "--out", previous, "--overwrite"])
    #expect(again.status == 65)
    #expect(listDirectory(previous).isEmpty)
  }

  @Test("files a killed run left are named in the refusal, with the hint that --overwrite helps")
  func killedRunLeftovers() throws {
    let out = makeTemporaryDirectory()
    for name in [".apns.ndjson.lz4.partial", ".summary.json.partial"] {
      try "partial".write(toFile: out + "/" + name, atomically: true, encoding: .utf8)
    }
    let refused = eval([], out: out)
    #expect(refused.status == 64)
    #expect(refused.stderr.contains(".apns.ndjson.lz4.partial"), "\(refused.stderr)")
    #expect(refused.stderr.contains("killed; --overwrite removes them"), "\(refused.stderr)")
    let cleared = eval(["--overwrite"], out: out)
    #expect(cleared.status == 0, "\(cleared.stderr)")
    #expect(!listDirectory(out).contains { $0.hasSuffix(".partial") })
  }

  @Test("a non-empty folder is refused without --overwrite; --overwrite removes only a run's files")
  func overwrite() throws {
    let out = makeTemporaryDirectory()
    try "keep".write(toFile: out + "/notes.txt", atomically: true, encoding: .utf8)
    try "stale".write(toFile: out + "/sms.ndjson.lz4", atomically: true, encoding: .utf8)
    let refused = eval([], out: out)
    #expect(refused.status == 64)
    #expect(listDirectory(out) == ["notes.txt", "sms.ndjson.lz4"])
    let replaced = eval(["--overwrite"], out: out)
    #expect(replaced.status == 0)
    #expect(
      listDirectory(out) == [
        "apns.ndjson.lz4", "email.ndjson.lz4", "fcm.ndjson.lz4", "notes.txt", "rejected.ndjson",
        "summary.json", "webpush.ndjson.lz4",
      ])
  }

  @Test("bad command lines and unreadable input have their own exit codes")
  func exitCodes() {
    let out = makeTemporaryDirectory() + "/out"
    #expect(
      runProcess(fanoutExecutable, ["eval", "--snapshot", sampleSnapshot, "--out", out]).status
        == 64)
    #expect(eval(["--threads", "0"], out: out).status == 64)
    #expect(eval([], out: out, messages: "/nonexistent/traffic.ndjson").status == 66)
    #expect(!FileManager.default.fileExists(atPath: out))
    let folder = makeTemporaryDirectory()
    let directory = eval([], out: out, messages: folder)
    #expect(directory.status == 66)
    #expect(directory.stderr.contains("cannot read messages from '\(folder)': is a directory"))
    #expect(!FileManager.default.fileExists(atPath: out))
    let help = runProcess(fanoutExecutable, ["eval", "--help"])
    #expect(help.status == 0)
    #expect(help.text.contains("--snapshot"))
  }

  @Test("--summary-only counts what a full run counts and writes no delivery lists")
  func summaryOnly() throws {
    let full = makeTemporaryDirectory() + "/full"
    let counted = makeTemporaryDirectory() + "/counted"
    #expect(eval([], out: full).status == 0)
    let result = eval(["--summary-only"], out: counted)
    #expect(result.status == 0, "\(result.stderr)")
    #expect(listDirectory(counted) == ["rejected.ndjson", "summary.json"])
    #expect(summaryCounts(counted) == summaryCounts(full))
    #expect(readText(counted + "/rejected.ndjson") == readText(full + "/rejected.ndjson"))
    let both = eval(["--summary-only", "--decisions"], out: makeTemporaryDirectory() + "/x")
    #expect(both.status == 64)
  }

  @Test("snapshot check prints counts, or the refusal")
  func snapshotCheck() {
    let ok = runProcess(fanoutExecutable, ["snapshot", "check", sampleSnapshot])
    #expect(ok.status == 0)
    #expect(ok.text.contains("users: 16"))
    #expect(ok.text.contains("America/New_York"))
    #expect(ok.text.contains("apns: 8"))
    let bad = runProcess(
      fanoutExecutable,
      [
        "snapshot", "check",
        SQLiteFixture.make("INSERT INTO settings VALUES ('schema_version', '2');"),
      ])
    #expect(bad.status == 65)
    #expect(bad.stderr.contains("table settings"))
  }
}
