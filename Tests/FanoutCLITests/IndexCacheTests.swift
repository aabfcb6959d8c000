import FanoutTestSupport
import Foundation
import Testing

/// The sample v2 snapshot (every v2 table, the throttle) in a file of its own.
private func v2Snapshot(journalMode: String = "delete") -> String {
  SQLiteFixture.make(
    "PRAGMA journal_mode=\(journalMode);\n" + readText(datasetURL("sample-v2/snapshot.sql").path),
    schema: SQLiteFixture.v2Schema)
}

private let v2Traffic = datasetURL("sample-v2/traffic.ndjson").path

/// A snapshot is cached only once its times are this old (`SnapshotFingerprint`).
private func waitUntilSettled() { Thread.sleep(forTimeInterval: 2.1) }

/// Every output file but summary.json (its timings vary), decoded.
private func outputs(_ dir: String) -> [String: String] {
  var files: [String: String] = [:]
  for name in listDirectory(dir) where name != "summary.json" {
    files[name] =
      name.hasSuffix(".lz4")
      ? lz4CommandLineDecode(dir + "/" + name) ?? "(not LZ4)" : readText(dir + "/" + name)
  }
  return files
}

private func eval(_ snapshot: String, cache: [String]) -> (ProcessResult, [String: String]) {
  let out = makeTemporaryDirectory() + "/out"
  let result = runProcess(
    fanoutExecutable,
    ["eval", "--snapshot", snapshot, "--messages", v2Traffic, "--out", out, "--decisions"] + cache)
  return (result, outputs(out))
}

private func cachedFiles(_ dir: String) -> [String] {
  listDirectory(dir).filter { $0.hasSuffix(".fanout-index") }
}

@Suite("the compiled index cache")
struct IndexCacheTests {
  @Test("an unchanged snapshot is read back from the cache, with the same output bytes")
  func hit() throws {
    let snapshot = v2Snapshot()
    let cache = makeTemporaryDirectory("fanout-cache")
    let (_, fromSQLite) = eval(snapshot, cache: ["--no-index-cache"])
    #expect(fromSQLite["decisions.ndjson.lz4"]?.isEmpty == false)
    let (tooFresh, _) = eval(snapshot, cache: ["--index-cache", cache])
    #expect(tooFresh.status == 0)
    #expect(cachedFiles(cache).isEmpty, "a snapshot changed in the last 2 s is not cached")

    waitUntilSettled()
    let (first, filled) = eval(snapshot, cache: ["--index-cache", cache])
    #expect(first.status == 0 && first.stderr.isEmpty, "\(first.stderr)")
    #expect(filled == fromSQLite)
    let files = cachedFiles(cache)
    try #require(files.count == 1)
    // A hit marks the file used: its time is set to now.
    let file = cache + "/" + files[0]
    let old = Date(timeIntervalSinceNow: -3600)
    try FileManager.default.setAttributes([.modificationDate: old], ofItemAtPath: file)
    let (second, fromCache) = eval(snapshot, cache: ["--index-cache", cache])
    #expect(second.status == 0 && second.stderr.isEmpty, "\(second.stderr)")
    #expect(fromCache == fromSQLite)
    let touched = try FileManager.default.attributesOfItem(atPath: file)[.modificationDate] as! Date
    #expect(touched > old.addingTimeInterval(60), "the cached file was not read")
    #expect(cachedFiles(cache) == files)
  }

  @Test(
    "edits through sqlite3 right after a cached load are never answered from the cache",
    arguments: ["delete", "wal"])
  func editsAreSeen(journalMode: String) throws {
    let snapshot = v2Snapshot(journalMode: journalMode)
    let cache = makeTemporaryDirectory("fanout-cache")
    waitUntilSettled()
    let (_, before) = eval(snapshot, cache: ["--index-cache", cache])
    #expect(cachedFiles(cache).count == 1)
    // Two edits within the same second, each followed by a run: same size
    // of file, and (in WAL mode) the same header.
    for sql in [
      "UPDATE devices SET token = token || 'x' WHERE rowid = (SELECT min(rowid) FROM devices);",
      "UPDATE users SET chat_level = 'none' WHERE rowid = (SELECT min(rowid) FROM users);",
    ] {
      let edit = runProcess("/usr/bin/sqlite3", [snapshot, sql])
      #expect(edit.status == 0, "\(edit.stderr)")
      let (_, expected) = eval(snapshot, cache: ["--no-index-cache"])
      let (run, seen) = eval(snapshot, cache: ["--index-cache", cache])
      #expect(run.status == 0)
      #expect(seen == expected, "\(journalMode): \(sql)")
    }
    // Settled now: the state is cached under its own name, never the first one's.
    waitUntilSettled()
    let (_, expected) = eval(snapshot, cache: ["--no-index-cache"])
    #expect(expected != before, "the edits changed nothing")
    #expect(eval(snapshot, cache: ["--index-cache", cache]).1 == expected)
    #expect(cachedFiles(cache).count == 2)
    #expect(eval(snapshot, cache: ["--index-cache", cache]).1 == expected)
  }

  @Test("commits still in the WAL are never answered from the cache")
  func openWAL() throws {
    let snapshot = v2Snapshot(journalMode: "wal")
    let cache = makeTemporaryDirectory("fanout-cache")
    waitUntilSettled()
    let (_, before) = eval(snapshot, cache: ["--index-cache", cache])
    #expect(cachedFiles(cache).count == 1)
    // A writer that keeps its connection (so its commit stays in the WAL, unchecked-pointed).
    let writer = SQLiteSession(snapshot)
    #expect(writer.execute("PRAGMA wal_autocheckpoint = 0; DELETE FROM devices;") == nil)
    let (run, seen) = eval(snapshot, cache: ["--index-cache", cache])
    #expect(run.status == 0)
    #expect(seen != before)
    #expect(seen == eval(snapshot, cache: ["--no-index-cache"]).1)
    #expect(cachedFiles(cache).count == 1, "a state with a non-empty WAL is not cached")
    withExtendedLifetime(writer) {}
  }

  @Test(
    "a cut-short or corrupt cached file is reported in one line and rebuilt",
    arguments: ["truncate", "flip", "empty"])
  func damaged(damage: String) throws {
    let snapshot = v2Snapshot()
    let cache = makeTemporaryDirectory("fanout-cache")
    waitUntilSettled()
    let (_, expected) = eval(snapshot, cache: ["--index-cache", cache])
    let file = cache + "/" + (try #require(cachedFiles(cache).first))
    var bytes = try Data(contentsOf: URL(fileURLWithPath: file))
    switch damage {
    case "truncate": bytes = bytes.prefix(bytes.count - 100)
    case "flip": bytes[bytes.count / 2] ^= 0x40
    default: bytes = Data()
    }
    try bytes.write(to: URL(fileURLWithPath: file))
    let (run, seen) = eval(snapshot, cache: ["--index-cache", cache])
    #expect(run.status == 0)
    #expect(seen == expected)
    let lines = run.stderr.split(separator: "\n")
    #expect(lines.count == 1 && lines[0].contains("is not usable"), "\(run.stderr)")
    // Rebuilt: the next run reads it without complaint.
    let (again, _) = eval(snapshot, cache: ["--index-cache", cache])
    #expect(again.stderr.isEmpty, "\(again.stderr)")
    #expect(cachedFiles(cache).count == 1)
  }

  @Test("snapshot compile --out writes a file eval takes in place of the snapshot")
  func compileToFile() throws {
    let snapshot = v2Snapshot()
    let compiled = makeTemporaryDirectory() + "/snapshot.fanout-index"
    let compile = runProcess(
      fanoutExecutable, ["snapshot", "compile", snapshot, "--out", compiled])
    #expect(compile.status == 0, "\(compile.stderr)")
    #expect(compile.text == compiled + "\n")
    let (run, seen) = eval(compiled, cache: [])
    #expect(run.status == 0, "\(run.stderr)")
    #expect(seen == eval(snapshot, cache: ["--no-index-cache"]).1)

    // What narrates from the SQLite rows says it needs them.
    let explain = runProcess(
      fanoutExecutable,
      [
        "explain", "--snapshot", compiled, "--user", "ana", "--message",
        #"{"id":"x","channel":"team","ts":1773046800000}"#,
      ])
    #expect(explain.status == 65)
    #expect(explain.stderr.contains("is a compiled index"), "\(explain.stderr)")

    var bytes = try Data(contentsOf: URL(fileURLWithPath: compiled))
    bytes[bytes.count - 30] ^= 1
    try bytes.write(to: URL(fileURLWithPath: compiled))
    let (refused, _) = eval(compiled, cache: [])
    #expect(refused.status == 65)
    #expect(refused.stderr.contains("is not usable"), "\(refused.stderr)")
  }

  @Test(
    "snapshot compile --out the snapshot itself (or a link to it) is refused, the snapshot kept")
  func compileOverItself() throws {
    let snapshot = v2Snapshot()
    let before = try Data(contentsOf: URL(fileURLWithPath: snapshot))
    let link = makeTemporaryDirectory() + "/link.sqlite"
    #expect(symlink(snapshot, link) == 0)
    for out in [snapshot, link] {
      let compile = runProcess(
        fanoutExecutable, ["snapshot", "compile", "--snapshot", snapshot, "--out", out])
      #expect(compile.status == 64)
      #expect(compile.stderr.contains("is the snapshot itself"), "\(compile.stderr)")
    }
    #expect(try Data(contentsOf: URL(fileURLWithPath: snapshot)) == before)
  }

  @Test("a refused snapshot is never compiled")
  func refusedNotCompiled() throws {
    let snapshot = SQLiteFixture.make(
      SQLiteFixture.header + "INSERT INTO users (user_id, chat_level) VALUES ('u1', 'loud');")
    let cache = makeTemporaryDirectory("fanout-cache")
    waitUntilSettled()
    let out = makeTemporaryDirectory() + "/x.fanout-index"
    for extra in [["--out", out], ["--index-cache", cache]] {
      let compile = runProcess(fanoutExecutable, ["snapshot", "compile", snapshot] + extra)
      #expect(compile.status == 65)
      #expect(compile.stderr.contains("chat_level"), "\(compile.stderr)")
    }
    #expect(!FileManager.default.fileExists(atPath: out))
    #expect(listDirectory(cache).isEmpty)
  }

  @Test("a short command leaves its cache file: the write aside is waited for at exit")
  func writtenBeforeExit() throws {
    // Large enough (a 40 MB index) that its file is still being written
    // when `snapshot check` has printed.
    let generated = makeTemporaryDirectory("fanout-gen")
    let gen = runProcess(
      fanoutExecutable,
      ["gen", "--users", "50000", "--messages", "10", "--seed", "3", "--out", generated])
    try #require(gen.status == 0, "\(gen.stderr)")
    waitUntilSettled()
    let cache = makeTemporaryDirectory("fanout-cache")
    let check = runProcess(
      fanoutExecutable,
      ["snapshot", "check", generated + "/snapshot.sqlite", "--index-cache", cache])
    #expect(check.status == 0, "\(check.stderr)")
    #expect(cachedFiles(cache).count == 1)
    #expect(listDirectory(cache).allSatisfy { !$0.hasSuffix(".partial") })
  }

  @Test("snapshot compile fills the cache that later commands read")
  func compileIntoCache() throws {
    let snapshot = v2Snapshot()
    let cache = makeTemporaryDirectory("fanout-cache")
    let early = runProcess(
      fanoutExecutable, ["snapshot", "compile", snapshot, "--index-cache", cache])
    #expect(early.status == 75, "a snapshot changed in the last 2 s: \(early.stderr)")
    waitUntilSettled()
    let compile = runProcess(
      fanoutExecutable, ["snapshot", "compile", snapshot, "--index-cache", cache])
    #expect(compile.status == 0, "\(compile.stderr)")
    let files = cachedFiles(cache)
    #expect(files.count == 1 && compile.text == cache + "/" + files[0] + "\n")
    let check = runProcess(
      fanoutExecutable, ["snapshot", "check", snapshot, "--index-cache", cache])
    let plain = runProcess(fanoutExecutable, ["snapshot", "check", snapshot, "--no-index-cache"])
    #expect(check.status == 0 && check.text == plain.text)
  }
}

@Suite("the compiled index on a full disk")
struct IndexCacheFullDiskTests {
  @Test(
    "compile --out on a full disk: exit 73, nothing under the name or aside; a cache there is skipped"
  )
  func fullDisk() throws {
    guard let disk = SmallDisk(bytes: 1 << 20) else { return }  // (it printed why)
    defer { disk.unmount() }
    let snapshot = v2Snapshot()
    waitUntilSettled()
    var failures = 0
    for freePages in 0..<4 {
      disk.fill(leavingPages: freePages)
      let compiled = disk.path + "/x.fanout-index"
      let compile = runProcess(
        fanoutExecutable, ["snapshot", "compile", snapshot, "--out", compiled])
      if compile.status == 0 {
        // It fitted: whole, and taken in place of the snapshot.
        #expect(eval(compiled, cache: []).0.status == 0)
      } else {
        failures += 1
        #expect(compile.status == 73, "\(freePages): \(compile.stderr)")
        #expect(listDirectory(disk.path) == ["filler"], "\(freePages)")
      }
      unlink(compiled)
    }
    #expect(failures > 0)
    // The cache only saves time: on a full disk the run goes on without it.
    disk.fill(leavingPages: 0)
    let cache = disk.path + "/cache"
    let (run, seen) = eval(snapshot, cache: ["--index-cache", cache])
    #expect(run.status == 0, "\(run.stderr)")
    #expect(seen == eval(snapshot, cache: ["--no-index-cache"]).1)
    #expect(cachedFiles(cache).isEmpty)
  }
}
