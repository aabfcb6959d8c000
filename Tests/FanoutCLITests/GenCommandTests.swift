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
      [
        "gen", "--users", "3000", "--messages", "4000", "--seed", "8", "--out", dirs[1],
        "--overwrite",
      ])
    #expect(other.status == 0, "\(other.stderr)")
    #expect(FileManager.default.contents(atPath: dirs[1] + "/traffic.ndjson")! != traffic[0])
  }

  @Test("gen refuses a folder that is not empty, replaces its own files with --overwrite only")
  func folder() throws {
    let dir = makeTemporaryDirectory()
    let notes = dir + "/notes.txt"
    _ = FileManager.default.createFile(atPath: notes, contents: Data("mine\n".utf8))
    let args = ["gen", "--users", "50", "--messages", "20", "--out", dir]
    let refused = runProcess(fanoutExecutable, args)
    #expect(refused.status == 64, "\(refused.stderr)")
    #expect(refused.stderr.contains("is not empty"), "\(refused.stderr)")
    #expect(listDirectory(dir) == ["notes.txt"])
    let overwritten = runProcess(fanoutExecutable, args + ["--overwrite"])
    #expect(overwritten.status == 0, "\(overwritten.stderr)")
    #expect(listDirectory(dir) == ["notes.txt", "snapshot.sqlite", "traffic.ndjson"])
    #expect(readText(notes) == "mine\n")
  }

  @Test("gen on a full disk: exit 73, and neither file nor the folder it made is left")
  func fullDisk() throws {
    guard let disk = SmallDisk(bytes: 2 << 20) else { return }  // (it printed why)
    defer { disk.unmount() }
    let run = runProcess(
      fanoutExecutable,
      ["gen", "--users", "20000", "--messages", "40000", "--out", disk.path + "/g"])
    #expect(run.status == 73, "\(run.stderr)")
    #expect(
      !FileManager.default.fileExists(atPath: disk.path + "/g"), "\(listDirectory(disk.path))")
  }

  @Test("gen interrupted leaves nothing under a final name, nor partial files")
  func interrupted() throws {
    let parent = makeTemporaryDirectory()
    let errors = parent + "/stderr"
    let out = parent + "/out"
    let child = try #require(
      PlainChild(
        fanoutExecutable, ["gen", "--users", "40000", "--messages", "80000", "--out", out],
        stderr: errors))
    Thread.sleep(forTimeInterval: 0.4)
    kill(child.pid, SIGINT)
    let status = child.wait()
    #expect(status == 130, "\(readText(errors))")
    #expect(!FileManager.default.fileExists(atPath: out), "left \(listDirectory(out))")
  }

  @Test("--v2 adds contract v2's features to the same v1 data, and every v2 rule is reached")
  func v2() throws {
    let v1 = makeTemporaryDirectory()
    let v2 = makeTemporaryDirectory()
    for (dir, extra) in [(v1, [String]()), (v2, ["--v2"])] {
      let r = runProcess(
        fanoutExecutable,
        ["gen", "--users", "3000", "--messages", "4000", "--seed", "7", "--out", dir] + extra)
      #expect(r.status == 0, "\(r.stderr)")
    }
    // Each v2 line is its v1 line with fields added before the closing brace.
    let lines1 = readText(v1 + "/traffic.ndjson").split(separator: "\n")
    let lines2 = readText(v2 + "/traffic.ndjson").split(separator: "\n")
    #expect(lines1.count == lines2.count)
    #expect(zip(lines1, lines2).allSatisfy { $1.hasPrefix($0.dropLast()) })
    #expect(lines2.contains { $0.contains(#""silent":true"#) })
    #expect(lines2.contains { $0.contains(#""thread":"#) })

    let out = v2 + "/out"
    let eval = runProcess(
      fanoutExecutable,
      [
        "eval", "--snapshot", v2 + "/snapshot.sqlite", "--messages", v2 + "/traffic.ndjson",
        "--out", out,
      ])
    #expect(eval.status == 0, "\(eval.stderr)")
    let summary =
      try JSONSerialization.jsonObject(
        with: Data(contentsOf: URL(fileURLWithPath: out + "/summary.json"))) as! [String: Any]
    #expect(summary["rejected"] as? Int == 0)
    let suppressed = summary["suppressed"] as! [String: Int]
    for reason in [
      "silent", "sender_muted", "snoozed", "dnd", "muted", "not_mentioned", "throttled",
    ] {
      #expect((suppressed[reason] ?? 0) > 0, "no \(reason)")
    }
    #expect((summary["deferred"] as? Int ?? 0) > 0)

    // The throttle's verdicts depend on the order of lines only: the same
    // bytes whatever the number of threads.
    var outputs: [[String: Data]] = []
    for threads in [1, 2, 7] {
      let out = v2 + "/out-\(threads)"
      let run = runProcess(
        fanoutExecutable,
        [
          "eval", "--snapshot", v2 + "/snapshot.sqlite", "--messages", v2 + "/traffic.ndjson",
          "--out", out, "--decisions", "--threads", String(threads),
        ])
      #expect(run.status == 0, "\(run.stderr)")
      var files: [String: Data] = [:]
      for name in listDirectory(out) where name != "summary.json" {
        files[name] = FileManager.default.contents(atPath: out + "/" + name)
      }
      outputs.append(files)
    }
    #expect(outputs[0].count >= 4)
    #expect(outputs[0] == outputs[1])
    #expect(outputs[0] == outputs[2])
  }
}
