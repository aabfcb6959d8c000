import FanoutTestSupport
import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// A generated day large enough that a debug `eval` of it runs for longer
/// than the instants the signals are sent at.
private let day: (snapshot: String, traffic: String) = {
  let dir = makeTemporaryDirectory("fanout-signals")
  let gen = runProcess(
    fanoutExecutable,
    ["gen", "--users", "6000", "--messages", "20000", "--seed", "5", "--out", dir])
  if gen.status != 0 { Issue.record("fanout gen: \(gen.stderr)") }
  return (dir + "/snapshot.sqlite", dir + "/traffic.ndjson")
}()

/// Starts `fanout` with `arguments` as a shell would (`PlainChild`: no
/// signal blocked), sends `signal` `delay` seconds after the start, and
/// waits for the end: (exit status or -signal, stderr).
private func interrupt(
  _ arguments: [String], with signal: Int32, after delay: Double, keepInputOpen: Bool = false
) -> (status: Int32, stderr: String) {
  let errors = makeTemporaryDirectory() + "/stderr"
  guard
    let child = PlainChild(
      fanoutExecutable, arguments, stderr: errors, keepInputOpen: keepInputOpen)
  else {
    Issue.record("cannot run fanout")
    return (127, "")
  }
  // Timed from main's first instruction: a busy machine may take longer
  // than the whole delay to load the program.
  waitUntilSignalsBlocked(child.pid)
  Thread.sleep(forTimeInterval: delay)
  kill(child.pid, signal)
  let status = child.wait()
  return (status, readText(errors))
}

/// Instants from 50 to 100 ms after the first instruction of `main` (the
/// dynamic loader's work before it cannot be covered by the program itself,
/// docs/contract.md says so: about 1 ms for a release build, but up to
/// 10 ms for this debug build, and more on a busy machine), all while the
/// stage still loads its snapshot.
private func instants(_ count: Int, seed: UInt64) -> [Double] {
  var random = SeededRandom(seed: seed)
  return (0..<count).map { _ in 0.050 + Double(random.next() % 50_000) / 1_000_000 }
}

@Suite("signals are handled from the first instant")
struct SignalTests {
  @Test(
    "eval interrupted at any instant removes its partial files, lock and new folder; exit 128+N")
  func evalInterrupted() throws {
    let signals: [(Int32, Int32, String)] = [
      (SIGINT, 130, "SIGINT"), (SIGTERM, 143, "SIGTERM"), (SIGHUP, 129, "SIGHUP"),
    ]
    for (k, delay) in instants(15, seed: 1).enumerated() {
      let (signal, status, name) = signals[k % 3]
      let parent = makeTemporaryDirectory()
      let out = parent + "/out"
      let run = interrupt(
        [
          "eval", "--snapshot", day.snapshot, "--messages", day.traffic, "--out", out,
          "--decisions", "--no-index-cache",
        ], with: signal, after: delay)
      if run.status == 0 { continue }  // finished first: nothing to undo
      #expect(run.status == status, "\(name) at \(delay) s: \(run.stderr)")
      #expect(run.stderr.contains("stopped by \(name)"), "\(run.stderr)")
      // Either nothing, or (a signal that waited for the renames) the whole run.
      let left = (try? FileManager.default.contentsOfDirectory(atPath: out)) ?? []
      #expect(
        listDirectory(parent) == []
          || (left.contains("summary.json") && !left.contains { $0.hasPrefix(".") }),
        "\(name) at \(delay) s left \(left)")
    }
  }

  @Test("whatif interrupted removes its outputs and its private copy of A")
  func whatifInterrupted() throws {
    let parent = makeTemporaryDirectory()
    let temporary = makeTemporaryDirectory("fanout-tmp")
    let errors = parent + "/stderr"
    let child = try #require(
      PlainChild(
        fanoutExecutable,
        [
          "whatif", "--snapshot", day.snapshot, "--messages", day.traffic, "--out", parent + "/out",
          "--sql", "UPDATE users SET dnd_start = 1320, dnd_end = 480 WHERE dnd_start IS NULL",
          "--no-index-cache",
        ], stderr: errors, environment: ["TMPDIR": temporary]))
    waitUntilSignalsBlocked(child.pid)
    Thread.sleep(forTimeInterval: 0.6)
    kill(child.pid, SIGINT)
    let status = child.wait()
    if status == 0 { return }  // finished first
    #expect(status == 130, "\(readText(errors))")
    #expect(listDirectory(parent) == ["stderr"], "\(listDirectory(parent))")
    #expect(listDirectory(temporary).isEmpty, "left \(listDirectory(temporary))")
  }

  /// SIGKILL runs no cleanup: the killed run's private copy of A stays in
  /// TMPDIR until a later `whatif --sql` finds it abandoned (unlocked, a
  /// minute old) and removes it, and nothing else.
  @Test("a whatif killed outright leaves its private copy; the next one removes it, and only it")
  func whatifKilled() throws {
    let temporary = makeTemporaryDirectory("fanout-tmp")
    let endless =
      "WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) SELECT count(*) FROM r"
    let child = try #require(
      PlainChild(
        fanoutExecutable,
        [
          "whatif", "--snapshot", day.snapshot, "--messages", day.traffic,
          "--out", makeTemporaryDirectory() + "/out", "--sql", endless,
        ], stderr: makeTemporaryDirectory() + "/stderr", environment: ["TMPDIR": temporary]))
    var killed: [String] = []
    for _ in 0..<600 where killed.isEmpty {
      Thread.sleep(forTimeInterval: 0.05)
      killed = listDirectory(temporary).filter {
        listDirectory(temporary + "/" + $0).contains("scenario.sqlite")
      }
    }
    kill(child.pid, SIGKILL)
    #expect(child.wait() == -SIGKILL)
    #expect(killed.count == 1, "\(listDirectory(temporary))")

    // Around it: folders the next run must leave as they are.
    let files = FileManager.default
    func folder(_ name: String, holding names: [String]) throws -> String {
      let path = temporary + "/" + name
      try files.createDirectory(atPath: path, withIntermediateDirectories: false)
      for file in names {
        #expect(files.createFile(atPath: path + "/" + file, contents: Data([1])))
      }
      return path
    }
    let live = try folder("fanout-whatif-LIVE00", holding: ["scenario.sqlite"])
    let young = try folder("fanout-whatif-YOUNG0", holding: ["scenario.sqlite"])
    let foreign = try folder("fanout-whatif-OTHER0", holding: ["scenario.sqlite", "notes.txt"])
    let target = try folder("elsewhere", holding: ["scenario.sqlite"])
    try files.createSymbolicLink(
      atPath: temporary + "/fanout-whatif-LINK00", withDestinationPath: target)
    let minutesAgo = Date(timeIntervalSinceNow: -120)
    for path in [temporary + "/" + killed[0], live, foreign, target] {
      try files.setAttributes([.modificationDate: minutesAgo], ofItemAtPath: path)
    }
    // A run still using its folder holds its lock.
    let liveLock = open(live, O_RDONLY | O_DIRECTORY)
    defer { close(liveLock) }
    #expect(flock(liveLock, LOCK_EX) == 0)

    let next = runProcess(
      fanoutExecutable,
      [
        "whatif", "--snapshot", day.snapshot, "--messages", day.traffic,
        "--out", makeTemporaryDirectory() + "/out", "--sql", "UPDATE users SET chat_level = 'all'",
      ], environment: ["TMPDIR": temporary])
    #expect(next.status == 0, "\(next.stderr)")
    #expect(
      listDirectory(temporary)
        == [
          "elsewhere", "fanout-whatif-LINK00", "fanout-whatif-LIVE00", "fanout-whatif-OTHER0",
          "fanout-whatif-YOUNG0",
        ])
    #expect(listDirectory(foreign) == ["notes.txt", "scenario.sqlite"])
    for kept in [live, young, target] { #expect(listDirectory(kept) == ["scenario.sqlite"]) }
  }

  @Test("in a folder that existed, an interrupted run leaves it as it found it: empty")
  func existingFolder() throws {
    let out = makeTemporaryDirectory()
    let run = interrupt(
      [
        "eval", "--snapshot", day.snapshot, "--messages", day.traffic, "--out", out,
        "--decisions", "--no-index-cache",
      ], with: SIGINT, after: 0.3)
    #expect(run.status == 130, "\(run.stderr)")
    #expect(FileManager.default.fileExists(atPath: out))
    let left = (try? FileManager.default.contentsOfDirectory(atPath: out)) ?? ["?"]
    #expect(left.isEmpty, "hidden files left: \(left)")
  }

  @Test("the stage stops cleanly on SIGTERM or SIGINT sent at any instant, even while loading")
  func streamStops() throws {
    for (k, delay) in instants(16, seed: 2).enumerated() {
      let signal = k % 2 == 0 ? SIGTERM : SIGINT
      let name = k % 2 == 0 ? "SIGTERM" : "SIGINT"
      // Its input held open: the stage ends only by the signal.
      let run = interrupt(
        ["stream", "--snapshot", day.snapshot, "--out", "-", "--no-index-cache"],
        with: signal, after: delay, keepInputOpen: true)
      #expect(run.status == 0, "\(name) at \(delay) s: \(run.stderr)")
      #expect(run.stderr.contains("stopped (\(name)"), "\(name) at \(delay) s: \(run.stderr)")
    }
  }
}
