import FanoutTestSupport
import Foundation
import Testing

/// `fanout snapshot split`, `eval --mergeable` per shard and `fanout merge`
/// give exactly the files of one `fanout eval` on the whole snapshot.
@Suite("recipient shards: split, eval per shard, merge")
struct ScaleOutTests {
  static let sample = SQLiteFixture.make(
    readText(datasetURL("sample-v2/snapshot.sql").path), schema: SQLiteFixture.v2Schema)

  /// v1 and v2 data (mutes across shards, large channels, a throttle,
  /// deferral, threads), made once.
  static let generated: [(snapshot: String, traffic: String)] = ["", "--v2", "--v3"].map { flag in
    let dir = makeTemporaryDirectory()
    let r = runProcess(
      fanoutExecutable,
      ["gen", "--users", "4000", "--messages", "6000", "--seed", "3", "--out", dir]
        + (flag.isEmpty ? [] : [flag]))
    if r.status != 0 { Issue.record("fanout gen: \(r.stderr)") }
    // Repeated ids and lines out of time order: line 1 again at the end.
    let traffic = dir + "/traffic.ndjson"
    let first = readText(traffic).split(separator: "\n")[0]
    let handle = FileHandle(forWritingAtPath: traffic)!
    handle.seekToEndOfFile()
    handle.write(Data((first + "\n\nnot json\n" + first + "\n").utf8))
    handle.closeFile()
    return (dir + "/snapshot.sqlite", traffic)
  }

  /// Runs the three steps and returns (one-node folder, merged folder).
  func splitEvalMerge(
    snapshot: String, traffic: String, shards: Int, extra: [String] = []
  ) -> (one: String, merged: String) {
    let work = makeTemporaryDirectory()
    let one = runProcess(
      fanoutExecutable,
      ["eval", "--snapshot", snapshot, "--messages", traffic, "--out", work + "/one"] + extra)
    #expect(one.status == 0, "\(one.stderr)")
    let split = runProcess(
      fanoutExecutable,
      ["snapshot", "split", snapshot, "--shards", "\(shards)", "--out", work + "/shards"])
    #expect(split.status == 0, "\(split.stderr)")
    var outputs: [String] = []
    // Shards in reverse order: merge takes them in any order.
    for k in (0..<shards).reversed() {
      let path = work + "/shards/shard-\(k)-of-\(shards).sqlite"
      let check = runProcess(fanoutExecutable, ["snapshot", "check", path])
      #expect(check.status == 0, "\(check.stderr)")
      let out = work + "/s\(k)"
      let eval = runProcess(
        fanoutExecutable,
        ["eval", "--snapshot", path, "--messages", traffic, "--out", out, "--mergeable"] + extra
          + ["--threads", "\(1 + k % 3)"])
      #expect(eval.status == 0, "\(eval.stderr)")
      outputs.append(out)
    }
    let merge = runProcess(fanoutExecutable, ["merge", "--out", work + "/merged"] + outputs)
    #expect(merge.status == 0, "\(merge.stderr)")
    return (work + "/one", work + "/merged")
  }

  /// Every file byte for byte; summary.json apart from its times.
  func expectSameFiles(_ one: String, _ merged: String) {
    #expect(listDirectory(one) == listDirectory(merged))
    for name in listDirectory(one) {
      let a = FileManager.default.contents(atPath: one + "/" + name)
      let b = FileManager.default.contents(atPath: merged + "/" + name)
      if name == "summary.json" {
        let untimed = { (data: Data?) in
          String(decoding: data ?? Data(), as: UTF8.self).split(separator: "\n").filter {
            !$0.contains("\"seconds\"") && !$0.contains("pairs_per_second")
              && !$0.contains("\"timings\"")
          }
        }
        #expect(untimed(a) == untimed(b), "summary.json")
      } else {
        #expect(a == b, "\(name) differs")
      }
    }
  }

  @Test("the v2 sample, with decisions, for 1, 2, 3 and 7 shards", arguments: [1, 2, 3, 7])
  func sample(_ shards: Int) {
    let (one, merged) = splitEvalMerge(
      snapshot: Self.sample, traffic: datasetURL("sample-v2/traffic.ndjson").path,
      shards: shards, extra: ["--decisions"])
    expectSameFiles(one, merged)
  }

  @Test(
    "generated v1 and v2 data, with repeated ids and rejected lines, for 2, 3 and 7 shards",
    arguments: [0, 1], [2, 3, 7])
  func generated(_ data: Int, _ shards: Int) {
    let (snapshot, traffic) = Self.generated[data]
    let (one, merged) = splitEvalMerge(
      snapshot: snapshot, traffic: traffic, shards: shards, extra: ["--decisions"])
    expectSameFiles(one, merged)
    // The data reaches what sharding must keep exact.
    let summary = readText(one + "/summary.json")
    #expect(!summary.contains(#""delivered": 0,"#))
    if data == 1 {
      #expect(!summary.contains(#""throttled": 0"#), "no throttled pair")
      #expect(!summary.contains(#""sender_muted": 0"#), "no muted sender")
    }
  }

  @Test(
    "generated v3 data: notification fields and update lines merge into one-node bytes",
    arguments: [3, 5])
  func generatedV3(_ shards: Int) {
    let (snapshot, traffic) = Self.generated[2]
    let (one, merged) = splitEvalMerge(
      snapshot: snapshot, traffic: traffic, shards: shards, extra: ["--decisions"])
    expectSameFiles(one, merged)
    // The data reaches every part of section 6.
    let summary = readText(one + "/summary.json")
    for zero in [#""hidden": 0"#, #""removed": 0"#, #""cancelled": 0"#, #""reads": 0"#] {
      #expect(!summary.contains(zero), "\(zero) in \(summary)")
    }
    #expect(listDirectory(merged).contains("updates.ndjson.lz4"))
  }

  @Test(
    "user ids that JSON escapes, or order by bytes past ASCII, merge in one-node order",
    arguments: [3, 7])
  func escapedIDs(_ shards: Int) throws {
    // 40 users: quotes, backslashes, control characters, non-ASCII, all in
    // one channel with two devices each, so every message spans shards.
    let ids = (0..<40).map { n in
      [
        "'q\"\(n)'", "'b\\\(n)'", "char(1) || 'c\(n)'", "'é\(n)'", "'日\(n)'", "'Z\(n)'", "'a\(n)'",
        "char(9) || '\(n)'",
      ][n % 8]
    }
    var sql = "INSERT INTO channels VALUES ('room', 'group');\n"
    for (n, id) in ids.enumerated() {
      sql += "INSERT INTO users (user_id) VALUES (\(id));\n"
      sql += "INSERT INTO members VALUES ('room', \(id));\n"
      sql +=
        "INSERT INTO devices VALUES (\(2 * n + 1), \(id), 'apns', 'a\(n)'), (\(2 * n + 2), \(id), 'fcm', 'f\(n)');\n"
    }
    let snapshot = SQLiteFixture.make(sql)
    let dir = makeTemporaryDirectory()
    let traffic = dir + "/traffic.ndjson"
    let lines = (1...5).map { #"{"id":"m\#($0)","channel":"room","ts":\#($0 * 1000)}"# }
    try Data((lines.joined(separator: "\n") + "\n").utf8).write(to: URL(fileURLWithPath: traffic))
    let (one, merged) = splitEvalMerge(
      snapshot: snapshot, traffic: traffic, shards: shards, extra: ["--decisions"])
    expectSameFiles(one, merged)
    #expect(readText(one + "/summary.json").contains(#""delivered": 200,"#))
  }

  @Test("a user's shard is Spark's pmod(xxhash64(user_id), N)")
  func shardFunction() {
    // Spark 4 (pyspark 4.3.0): SELECT pmod(xxhash64(id), 7) for these ids.
    let spark: [(String, Int)] = [
      ("", 3), ("abc", 4), ("u1", 3), ("user-000123", 1), ("é日本", 5),
      (String(repeating: "a", count: 40), 4),
    ]
    let dir = makeTemporaryDirectory()
    let users = spark.enumerated().map { "('\($0.element.0)')" }.joined(separator: ", ")
    let snapshot = SQLiteFixture.make("INSERT INTO users (user_id) VALUES \(users);")
    let r = runProcess(
      fanoutExecutable, ["snapshot", "split", snapshot, "--shards", "7", "--out", dir])
    #expect(r.status == 0, "\(r.stderr)")
    for (id, shard) in spark {
      let rows = runProcess(
        "/usr/bin/sqlite3",
        [dir + "/shard-\(shard)-of-7.sqlite", "SELECT count(*) FROM users WHERE user_id = '\(id)'"])
      #expect(rows.text == "1\n", "user '\(id)' not in shard \(shard)")
    }
  }

  @Test(
    "split and merge on a terminal name their steps and clear them; off a terminal they draw nothing"
  )
  func splitProgress() {
    let dir = makeTemporaryDirectory()
    let plain = runProcess(
      fanoutExecutable, ["snapshot", "split", Self.sample, "--shards", "2", "--out", dir + "/a"])
    #expect(plain.status == 0 && plain.stderr.isEmpty, "\(plain.stderr)")
    // `script` runs the command on a pseudo-terminal and copies what it draws.
    let command = [
      fanoutExecutable, "snapshot", "split", Self.sample, "--shards", "2", "--out", dir + "/b",
    ]
    .map { "'\($0)'" }.joined(separator: " ")
    let terminal = runProcess("/usr/bin/script", ["-qec", command, "/dev/null"])
    #expect(terminal.status == 0, "\(terminal.stderr)")
    let drawn = terminal.text
    #expect(drawn.contains("checking shard 1 of 2…") && drawn.contains("checking shard 2 of 2…"))
    // Cleared before the summary: the last line starts with the erase sequence.
    #expect(drawn.contains("\r\u{1B}[K2 shards of "), "\(drawn.debugDescription)")

    // merge too: its step on a terminal, nothing off one.
    let traffic = datasetURL("sample-v2/traffic.ndjson").path
    for k in 0..<2 {
      let eval = runProcess(
        fanoutExecutable,
        [
          "eval", "--snapshot", dir + "/a/shard-\(k)-of-2.sqlite", "--messages", traffic, "--out",
          dir + "/s\(k)", "--mergeable",
        ])
      #expect(eval.status == 0, "\(eval.stderr)")
    }
    let merge = ["merge", "--out", dir + "/m", dir + "/s0", dir + "/s1"]
    let plainMerge = runProcess(fanoutExecutable, merge)
    #expect(plainMerge.status == 0 && plainMerge.stderr.isEmpty, "\(plainMerge.stderr)")
    let terminalMerge = runProcess(
      "/usr/bin/script",
      [
        "-qec",
        ([fanoutExecutable] + merge + ["--overwrite"]).map { "'\($0)'" }.joined(separator: " "),
        "/dev/null",
      ])
    #expect(terminalMerge.status == 0, "\(terminalMerge.text)")
    #expect(terminalMerge.text.contains("files from 2 shards…"), "\(terminalMerge.text)")
    #expect(
      terminalMerge.text.contains("\r\u{1B}[K2 shards merged: "),
      "\(terminalMerge.text.debugDescription)")
  }

  @Test("split refuses N < 1 or > 1024, an existing output and a bad snapshot, leaving nothing")
  func splitRefusals() {
    let dir = makeTemporaryDirectory()
    let zero = runProcess(
      fanoutExecutable, ["snapshot", "split", Self.sample, "--shards", "0", "--out", dir + "/a"])
    #expect(zero.status == 64)
    #expect(!FileManager.default.fileExists(atPath: dir + "/a"))
    let huge = runProcess(
      fanoutExecutable,
      ["snapshot", "split", Self.sample, "--shards", "9223372036854775807", "--out", dir + "/a"])
    #expect(huge.status == 64)
    #expect(huge.stderr.contains("--shards must be at most 1024"), "\(huge.stderr)")
    #expect(!FileManager.default.fileExists(atPath: dir + "/a"))

    try? FileManager.default.createDirectory(atPath: dir + "/b", withIntermediateDirectories: true)
    FileManager.default.createFile(atPath: dir + "/b/x", contents: nil)
    let exists = runProcess(
      fanoutExecutable, ["snapshot", "split", Self.sample, "--shards", "2", "--out", dir + "/b"])
    #expect(exists.status == 64)
    #expect(listDirectory(dir + "/b") == ["x"])

    // A bad row lands in one shard: the split is refused whole.
    let bad = SQLiteFixture.copy(
      Self.sample, applying: "INSERT INTO devices VALUES (9999, 'nobody', 'apns', 'tok-x');")
    let refused = runProcess(
      fanoutExecutable, ["snapshot", "split", bad, "--shards", "3", "--out", dir + "/c"])
    #expect(refused.status == 65)
    #expect(refused.stderr.contains("devices"), "\(refused.stderr)")
    #expect(refused.stderr.contains("nobody"), "\(refused.stderr)")
    #expect(!FileManager.default.fileExists(atPath: dir + "/c"))
  }

  @Test("merge refuses a missing, incomplete, repeated or foreign shard, and writes nothing")
  func mergeRefusals() throws {
    let work = makeTemporaryDirectory()
    let traffic = datasetURL("sample-v2/traffic.ndjson").path
    for n in [2, 3] {
      let split = runProcess(
        fanoutExecutable,
        ["snapshot", "split", Self.sample, "--shards", "\(n)", "--out", work + "/split\(n)"])
      #expect(split.status == 0, "\(split.stderr)")
      for k in 0..<n {
        let eval = runProcess(
          fanoutExecutable,
          [
            "eval", "--snapshot", work + "/split\(n)/shard-\(k)-of-\(n).sqlite", "--messages",
            traffic, "--out", work + "/n\(n)s\(k)", "--mergeable",
          ])
        #expect(eval.status == 0, "\(eval.stderr)")
      }
    }
    let other = work + "/other.ndjson"
    try Data(readText(traffic).utf8.dropLast(2) + Array("\n".utf8)).write(
      to: URL(fileURLWithPath: other))
    let otherTraffic = runProcess(
      fanoutExecutable,
      [
        "eval", "--snapshot", work + "/split2/shard-1-of-2.sqlite", "--messages", other, "--out",
        work + "/foreign", "--mergeable",
      ])
    #expect(otherTraffic.status == 0)
    let notMergeable = runProcess(
      fanoutExecutable,
      ["eval", "--snapshot", Self.sample, "--messages", traffic, "--out", work + "/plain"])
    #expect(notMergeable.status == 0)
    try FileManager.default.copyItem(atPath: work + "/n2s1", toPath: work + "/incomplete")
    try FileManager.default.removeItem(atPath: work + "/incomplete/summary.json")
    // A shard folder with a file gone, one byte changed inside an LZ4 frame,
    // or a file that its run did not write.
    let gateway = try #require(
      listDirectory(work + "/n2s0").first { $0.hasSuffix(".ndjson.lz4") })
    for damaged in ["lacking", "flipped", "extra", "linked", "fifo"] {
      try FileManager.default.copyItem(atPath: work + "/n2s0", toPath: work + "/" + damaged)
    }
    // The same bytes through a link, and a FIFO nobody writes (a merge must not wait on it).
    for damaged in ["linked", "fifo"] {
      try FileManager.default.removeItem(atPath: work + "/\(damaged)/" + gateway)
    }
    #expect(symlink(work + "/n2s0/" + gateway, work + "/linked/" + gateway) == 0)
    #expect(mkfifo(work + "/fifo/" + gateway, 0o644) == 0)
    try FileManager.default.removeItem(atPath: work + "/lacking/" + gateway)
    var bytes = try Data(contentsOf: URL(fileURLWithPath: work + "/flipped/" + gateway))
    bytes[bytes.count / 2] ^= 0x01
    try bytes.write(to: URL(fileURLWithPath: work + "/flipped/" + gateway))
    try FileManager.default.copyItem(
      atPath: work + "/n2s0/" + gateway, toPath: work + "/extra/x" + gateway)
    // Its summary through a link (to the very summary it had), or a FIFO.
    for damaged in ["summary-linked", "summary-fifo"] {
      try FileManager.default.copyItem(atPath: work + "/n2s0", toPath: work + "/" + damaged)
      try FileManager.default.moveItem(
        atPath: work + "/\(damaged)/summary.json", toPath: work + "/\(damaged)/summary.real")
    }
    #expect(symlink("summary.real", work + "/summary-linked/summary.json") == 0)
    #expect(mkfifo(work + "/summary-fifo/summary.json", 0o644) == 0)
    // Shard 1 of a split of another snapshot (one preference changed).
    let changed = work + "/changed.sqlite"
    try FileManager.default.copyItem(atPath: Self.sample, toPath: changed)
    let edit = runProcess(
      "/usr/bin/sqlite3", [changed, "UPDATE users SET chat_level = 'none' WHERE rowid = 1"])
    #expect(edit.status == 0, "\(edit.stderr)")
    let otherSplit = runProcess(
      fanoutExecutable, ["snapshot", "split", changed, "--shards", "2", "--out", work + "/split-c"])
    #expect(otherSplit.status == 0, "\(otherSplit.stderr)")
    let otherShard = runProcess(
      fanoutExecutable,
      [
        "eval", "--snapshot", work + "/split-c/shard-1-of-2.sqlite", "--messages", traffic,
        "--out", work + "/other-split", "--mergeable",
      ])
    #expect(otherShard.status == 0, "\(otherShard.stderr)")

    let cases: [([String], String)] = [
      (["n2s0"], "shard 1/2 is missing"),
      (["n2s0", "n2s0"], "given twice"),
      (["n2s0", "n3s1"], "different numbers of shards"),
      (["n2s0", "foreign"], "same traffic"),
      (["n2s0", "incomplete"], "no summary.json"),
      (["n2s0", "plain"], "--mergeable"),
      (["n2s1", "lacking"], "is missing: its run wrote it"),
      (["n2s1", "flipped"], "is not the file its run wrote"),
      (["n2s1", "extra"], "is not among the files its run wrote"),
      (["n2s1", "linked"], "is not a regular file"),
      (["n2s1", "fifo"], "is not a regular file"),
      (["n2s1", "summary-linked"], "summary-linked/summary.json' is not a regular file"),
      (["n2s1", "summary-fifo"], "summary-fifo/summary.json' is not a regular file"),
      (["n2s0", "other-split"], "different splits"),
    ]
    for (folders, message) in cases {
      let merge = runProcess(
        fanoutExecutable, ["merge", "--out", work + "/m"] + folders.map { work + "/" + $0 })
      #expect(merge.status == 65, "\(folders)")
      #expect(merge.stderr.contains(message), "\(folders): \(merge.stderr)")
      #expect(!FileManager.default.fileExists(atPath: work + "/m"), "\(folders)")
    }
    // eval --mergeable needs a shard.
    let notShard = runProcess(
      fanoutExecutable,
      [
        "eval", "--snapshot", Self.sample, "--messages", traffic, "--out", work + "/x",
        "--mergeable",
      ])
    #expect(notShard.status == 64)
    #expect(notShard.stderr.contains("not a shard snapshot"))
    #expect(!FileManager.default.fileExists(atPath: work + "/x"))
  }
}

/// What split and merge promise about their output folders.
@Suite("recipient shards: output folders, full disks")
struct ScaleOutFolderTests {
  static let sample = ScaleOutTests.sample

  @Test("split --overwrite replaces a previous or killed split's files, and keeps other files")
  func overwrite() throws {
    let dir = makeTemporaryDirectory()
    for name in ["shard-0-of-5.sqlite", ".shard-1-of-2.sqlite.partial", "notes.txt"] {
      FileManager.default.createFile(atPath: dir + "/" + name, contents: Data("x".utf8))
    }
    let refused = runProcess(
      fanoutExecutable, ["snapshot", "split", Self.sample, "--shards", "2", "--out", dir])
    #expect(refused.status == 64)
    let r = runProcess(
      fanoutExecutable,
      ["snapshot", "split", Self.sample, "--shards", "2", "--out", dir, "--overwrite"])
    #expect(r.status == 0, "\(r.stderr)")
    #expect(
      listDirectory(dir).sorted() == ["notes.txt", "shard-0-of-2.sqlite", "shard-1-of-2.sqlite"])
  }

  @Test("a full disk at any point: split and merge exit 73 and leave no file, or finish whole")
  func fullDisk() throws {
    guard let disk = SmallDisk(bytes: 1 << 20) else { return }  // (it printed why)
    defer { disk.unmount() }
    // Shard outputs to merge, made off the small disk.
    let work = makeTemporaryDirectory()
    let traffic = datasetURL("sample-v2/traffic.ndjson").path
    _ = runProcess(
      fanoutExecutable, ["snapshot", "split", Self.sample, "--shards", "2", "--out", work + "/s"])
    var shardOutputs: [String] = []
    for k in 0..<2 {
      let out = work + "/e\(k)"
      let r = runProcess(
        fanoutExecutable,
        [
          "eval", "--snapshot", work + "/s/shard-\(k)-of-2.sqlite", "--messages", traffic, "--out",
          out, "--mergeable", "--decisions",
        ])
      #expect(r.status == 0, "\(r.stderr)")
      shardOutputs.append(out)
    }
    var failures = 0
    for freePages in stride(from: 0, to: 200, by: 8) {
      disk.fill(leavingPages: freePages)
      for command in ["split", "merge"] {
        let out = disk.path + "/out-\(command)"
        let result =
          command == "split"
          ? runProcess(
            fanoutExecutable, ["snapshot", "split", Self.sample, "--shards", "3", "--out", out])
          : runProcess(fanoutExecutable, ["merge", "--out", out] + shardOutputs)
        let left = listDirectory(out)
        if result.status == 0 {
          #expect(left.count == (command == "split" ? 3 : 6), "\(command): \(left)")
        } else {
          failures += 1
          #expect(result.status == 73, "\(command) \(freePages): \(result.stderr)")
          #expect(left.isEmpty, "\(command) with \(freePages) free pages left \(left)")
        }
        try? FileManager.default.removeItem(atPath: out)
      }
    }
    #expect(failures > 4)
  }
}
