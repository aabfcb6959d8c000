import FanoutTestSupport
import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// The output folder's promises: one run per folder, never the root for an
/// empty path, and on any failure no file under a final name.
@Suite("Output folder promises")
struct OutputFolderTests {
  static let snapshot = SQLiteFixture.make(readText(datasetURL("sample/snapshot.sql").path))
  static let traffic = datasetURL("sample/traffic.ndjson").path

  static func eval(_ out: String, _ extra: [String] = []) -> ProcessResult {
    runProcess(
      fanoutExecutable,
      ["eval", "--snapshot", snapshot, "--messages", traffic, "--out", out] + extra)
  }

  static func whatif(_ out: String, temporary: String? = nil) -> ProcessResult {
    runProcess(
      fanoutExecutable,
      [
        "whatif", "--snapshot", snapshot, "--messages", traffic, "--out", out, "--sql",
        "UPDATE users SET dnd_start = 1320, dnd_end = 480 WHERE dnd_start IS NULL",
      ], environment: temporary.map { ["TMPDIR": $0] } ?? [:])
  }

  @Test("a folder held by another run is refused with its pid, and nothing in it is touched")
  func heldFolder() throws {
    let out = makeTemporaryDirectory()
    try "mine".write(toFile: out + "/.fanout.lock", atomically: false, encoding: .utf8)
    try "x".write(toFile: out + "/.apns.ndjson.lz4.partial", atomically: false, encoding: .utf8)
    // This process holds the lock, as a running `fanout` would.
    let fd = open(out + "/.fanout.lock", O_RDWR)
    #expect(fd >= 0)
    defer { close(fd) }
    #expect(flock(fd, LOCK_EX | LOCK_NB) == 0)
    _ = ftruncate(fd, 0)
    _ = "4242\n".withCString { pwrite(fd, $0, 5, 0) }

    for result in [
      Self.eval(out, ["--overwrite"]), Self.whatif(out),
      runProcess(
        fanoutExecutable, ["stream", "--snapshot", Self.snapshot, "--out", out],
        input: Array(readText(Self.traffic).utf8)),
    ] {
      #expect(result.status == 64, "\(result.stderr)")
      #expect(result.stderr.contains("output folder '\(out)' is in use by pid 4242"))
    }
    // The other run's partial file survives: nothing was removed or written.
    #expect(listDirectory(out) == [".apns.ndjson.lz4.partial", ".fanout.lock"])
  }

  @Test("two runs started together on one folder: one completes whole, the other is refused")
  func concurrentRuns() throws {
    // Enough traffic that the runs overlap.
    let lines = readText(Self.traffic).split(separator: "\n")
    let big = makeTemporaryDirectory() + "/traffic.ndjson"
    try (0..<20_000).map { String(lines[$0 % lines.count]) }.joined(separator: "\n")
      .write(toFile: big, atomically: true, encoding: .utf8)
    for _ in 0..<3 {
      let out = makeTemporaryDirectory() + "/out"
      let arguments = [
        "eval", "--snapshot", Self.snapshot, "--messages", big, "--out", out, "--decisions",
      ]
      let results = ResultSlots()
      DispatchQueue.concurrentPerform(iterations: 2) { i in
        results.store(runProcess(fanoutExecutable, arguments), at: i)
      }
      let statuses = results.all.map(\.status).sorted()
      #expect(statuses == [0, 64], "\(results.all.map(\.stderr))")
      #expect(
        listDirectory(out) == [
          "apns.ndjson.lz4", "decisions.ndjson.lz4", "email.ndjson.lz4", "fcm.ndjson.lz4",
          "rejected.ndjson", "summary.json", "webpush.ndjson.lz4",
        ])
      for name in listDirectory(out) where name.hasSuffix(".lz4") {
        #expect(runProcess("/usr/bin/lz4", ["-t", out + "/" + name]).status == 0, "\(name)")
      }
    }
  }

  /// `--overwrite` removes a previous run's files: never one this run
  /// reads. Auditing an `eval` folder's own delivery files into it, traffic
  /// named like an output, merging into a shard's folder: each is refused
  /// before anything is removed, and the input is left as it was.
  @Test("--overwrite never removes what the run reads; no output into an input folder")
  func inputsNeverRemoved() throws {
    let out = makeTemporaryDirectory()
    #expect(Self.eval(out).status == 0)
    let apns = try Data(contentsOf: URL(fileURLWithPath: out + "/apns.ndjson.lz4"))
    let audit = runProcess(
      fanoutExecutable,
      [
        "audit", "--snapshot", Self.snapshot, "--messages", Self.traffic, "--sent",
        out + "/apns.ndjson.lz4", "--out", out, "--overwrite",
      ])
    #expect(audit.status == 64)
    #expect(
      audit.stderr.contains(
        "--overwrite would remove '\(out)/apns.ndjson.lz4', which this run reads (--sent"),
      "\(audit.stderr)")
    #expect(try Data(contentsOf: URL(fileURLWithPath: out + "/apns.ndjson.lz4")) == apns)
    #expect(listDirectory(out).contains("summary.json"), "nothing was removed")

    let folder = makeTemporaryDirectory()
    let named = folder + "/rejected.ndjson"
    try readText(Self.traffic).write(toFile: named, atomically: false, encoding: .utf8)
    let eval = runProcess(
      fanoutExecutable,
      ["eval", "--snapshot", Self.snapshot, "--messages", named, "--out", folder, "--overwrite"])
    #expect(eval.status == 64)
    #expect(eval.stderr.contains("which this run reads (--messages"), "\(eval.stderr)")
    #expect(readText(named) == readText(Self.traffic))

    // A scenario's SQL file, read before the folder is claimed.
    let sqlNamed = folder + "/report.json"
    try "UPDATE users SET dnd_start = 0, dnd_end = 600".write(
      toFile: sqlNamed, atomically: false, encoding: .utf8)
    let whatif = runProcess(
      fanoutExecutable,
      [
        "whatif", "--snapshot", Self.snapshot, "--messages", Self.traffic, "--out", folder,
        "--overwrite", "--sql-file", sqlNamed,
      ])
    #expect(whatif.status == 64)
    #expect(whatif.stderr.contains("which this run reads (--sql-file"), "\(whatif.stderr)")
    #expect(readText(sqlNamed) == "UPDATE users SET dnd_start = 0, dnd_end = 600")

    // A link to an input is only a link: removed as any earlier output.
    let linked = makeTemporaryDirectory()
    #expect(symlink(Self.traffic, linked + "/summary.json") == 0)
    #expect(Self.eval(linked, ["--overwrite"]).status == 0)
    #expect(readText(linked + "/summary.json").hasPrefix("{"))

    let shards = makeTemporaryDirectory()
    #expect(
      runProcess(
        fanoutExecutable, ["snapshot", "split", Self.snapshot, "--shards", "2", "--out", shards]
      ).status == 0)
    let shardOuts = (0..<2).map { shards + "/out-\($0)" }
    for (k, shardOut) in shardOuts.enumerated() {
      let run = runProcess(
        fanoutExecutable,
        [
          "eval", "--snapshot", shards + "/shard-\(k)-of-2.sqlite", "--messages", Self.traffic,
          "--out", shardOut, "--mergeable",
        ])
      #expect(run.status == 0, "\(run.stderr)")
    }
    let before = listDirectory(shardOuts[0])
    let merge = runProcess(
      fanoutExecutable, ["merge", "--out", shardOuts[0] + "/", "--overwrite"] + shardOuts)
    #expect(merge.status == 64)
    #expect(merge.stderr.contains("is one this run reads (shard"), "\(merge.stderr)")
    #expect(listDirectory(shardOuts[0]) == before)
  }

  /// `--overwrite` removes what a run of ours wrote — an audit's
  /// `audit.json` and `unreadable.ndjson` too, which would otherwise pass
  /// for a new run's — and partial files only of such names.
  @Test("--overwrite removes every run's outputs and their partial files, nothing else")
  func overwriteRemovesOnlyOurs() throws {
    let out = makeTemporaryDirectory()
    let ours = [
      "audit.json", "unreadable.ndjson", "findings.ndjson.lz4", "report.html",
      ".apns.ndjson.lz4.partial", ".audit.json.partial",
    ]
    let theirs = [".notes.txt.partial", "notes.txt", ".partial"]
    for name in ours + theirs {
      try "old".write(toFile: out + "/" + name, atomically: false, encoding: .utf8)
    }
    let run = Self.eval(out, ["--overwrite"])
    #expect(run.status == 0, "\(run.stderr)")
    let left = Set(listDirectory(out))
    #expect(left.isSuperset(of: theirs))
    #expect(left.isDisjoint(with: ours), "\(left)")
  }

  /// "-" means standard output (`stream --out -`): every other `--out` is
  /// refused rather than taken as a file or folder named "-".
  @Test("--out - is refused wherever it cannot mean standard output, nothing named '-' made")
  func dashIsNotAPath() throws {
    let dir = makeTemporaryDirectory()
    let commands = [
      ["eval", "--snapshot", Self.snapshot, "--messages", Self.traffic, "--out", "-"],
      ["gen", "--users", "10", "--messages", "10", "--out", "-"],
      ["snapshot", "compile", Self.snapshot, "--out", "-"],
      [
        "prefs", "apply", "--snapshot", Self.snapshot, "--format", "stream", "--out", "-",
        datasetURL("changes/stream.json").path,
      ],
    ]
    for arguments in commands {
      let quoted = arguments.map { "'\($0)'" }.joined(separator: " ")
      let run = runProcess("/bin/sh", ["-c", "cd '\(dir)' && '\(fanoutExecutable)' \(quoted)"])
      #expect(run.status == 64, "\(arguments): \(run.stderr)")
      #expect(run.stderr.contains("'-' (standard output) is not one"), "\(run.stderr)")
    }
    #expect(listDirectory(dir).isEmpty)
  }

  @Test("an empty or blank output path is refused, never taken as the root", arguments: ["", " "])
  func emptyPath(path: String) {
    let result = Self.eval(path)
    #expect(result.status == 64)
    #expect(result.stderr.contains("the output folder path is empty"))
    #expect(!FileManager.default.fileExists(atPath: "/summary.json"))
  }

  @Test("a full disk at any point: exit 73 and no file under a final name, or a whole run")
  func fullDisk() throws {
    guard let disk = SmallDisk(bytes: 1 << 20) else { return }  // (it printed why)
    defer { disk.unmount() }
    var failures = 0
    // whatif's private copy of A goes on the full disk too.
    let temporary = disk.path + "/tmp"
    try FileManager.default.createDirectory(atPath: temporary, withIntermediateDirectories: true)
    // Leave 0, 1, 2, … free pages: the run fails at every file in turn, then fits.
    for freePages in 0..<24 {
      disk.fill(leavingPages: freePages)
      for command in ["eval", "whatif"] {
        let out = disk.path + "/out-\(command)"
        let result =
          command == "eval"
          ? Self.eval(out, ["--decisions"]) : Self.whatif(out, temporary: temporary)
        #expect(listDirectory(temporary).isEmpty, "\(command) \(freePages)")
        let left = listDirectory(out)
        if result.status == 0 {
          #expect(left.contains(command == "eval" ? "summary.json" : "report.json"))
        } else {
          failures += 1
          #expect(result.status == 73, "\(command) \(freePages): \(result.stderr)")
          #expect(left.isEmpty, "\(command) with \(freePages) free pages left \(left)")
        }
        try? FileManager.default.removeItem(atPath: out)
      }
    }
    #expect(failures > 4)  // the sweep did reach failures at several files
  }

  @Test("stream on a full disk: exit 73, whole segments kept, no partial file or lock left")
  func streamFullDisk() throws {
    guard let disk = SmallDisk(bytes: 1 << 20) else { return }  // (it printed why)
    defer { disk.unmount() }
    let input = Array(readText(Self.traffic).utf8)
    var failures = 0
    for freePages in 0..<16 {
      disk.fill(leavingPages: freePages)
      let out = disk.path + "/out-stream"
      // A segment per batch or two, so that the disk fills at every file in turn.
      let result = runProcess(
        fanoutExecutable,
        [
          "stream", "--snapshot", Self.snapshot, "--out", out, "--batch-messages", "4",
          "--rotate-mb", "0.002",
        ], input: input)
      let left = listDirectory(out)
      if result.status != 0 {
        failures += 1
        #expect(result.status == 73, "\(freePages): \(result.stderr)")
      }
      #expect(!left.contains { $0.hasPrefix(".") }, "\(freePages) free pages left \(left)")
      // What is left is whole segments: each has its batch records, each frame checks.
      for name in left {
        if name.hasSuffix(".lz4") {
          #expect(runProcess("/usr/bin/lz4", ["-t", out + "/" + name]).status == 0, "\(name)")
        }
        let number = name.split(separator: "-").last!.prefix(6)
        #expect(left.contains("batches-\(number).ndjson"), "\(name)")
      }
      try? FileManager.default.removeItem(atPath: out)
    }
    #expect(failures > 2)
  }

  @Test("prefs apply --out on a full disk: exit 73, no partial copy or its journal left")
  func prefsApplyFullDisk() throws {
    // The sample is 120 KB: the copy fails at its first pages, its middle and its end.
    guard let disk = SmallDisk(bytes: 512 << 10) else { return }  // (it printed why)
    defer { disk.unmount() }
    let changes = datasetURL("changes/stream.json").path
    var failures = 0
    for freePages in stride(from: 0, through: 40, by: 4) {
      disk.fill(leavingPages: freePages)
      let out = disk.path + "/p.sqlite"
      let result = runProcess(
        fanoutExecutable,
        [
          "prefs", "apply", "--snapshot", Self.snapshot, "--format", "stream", "--out", out,
          changes,
        ])
      var expected = [".p.sqlite.lock", "filler"]  // (the lock stays, as documented)
      if result.status == 0 {
        expected.append("p.sqlite")
      } else {
        failures += 1
        #expect(result.status == 73, "\(freePages): \(result.stderr)")
      }
      #expect(listDirectory(disk.path) == expected.sorted(), "\(freePages) free pages")
      unlink(out)
    }
    #expect(failures > 2)
  }
}

/// A small tmpfs mounted for one test, so that writes run out of space.
struct SmallDisk {
  let path: String

  /// Nil, after printing that the test is skipped, where mounting is not
  /// permitted.
  init?(bytes: Int) {
    path = makeTemporaryDirectory("fanout-disk")
    guard
      runProcess("/bin/mount", ["-t", "tmpfs", "-o", "size=\(bytes)", "tmpfs", path]).status == 0
    else {
      print("skipped: mounting a tmpfs is not permitted here")
      return nil
    }
  }

  /// Replaces the filler file so that `pages` pages of 4 KiB stay free.
  func fill(leavingPages pages: Int) {
    let filler = path + "/filler"
    unlink(filler)
    var st = statvfs()
    statvfs(path, &st)
    let free = Int(st.f_bavail) * Int(st.f_frsize)
    let size = max(0, free - pages * 4096)
    let fd = open(filler, O_WRONLY | O_CREAT, 0o644)
    let chunk = [UInt8](repeating: 1, count: 4096)
    var written = 0
    while written < size {
      let n = chunk.withUnsafeBytes { write(fd, $0.baseAddress, min(4096, size - written)) }
      if n <= 0 { break }
      written += n
    }
    close(fd)
  }

  func unmount() { _ = runProcess("/bin/umount", [path]) }
}

/// Two processes' results, stored from two threads.
final class ResultSlots: @unchecked Sendable {
  private let lock = NSLock()
  private var slots: [ProcessResult?] = [nil, nil]
  func store(_ result: ProcessResult, at i: Int) { lock.withLock { slots[i] = result } }
  var all: [ProcessResult] { lock.withLock { slots.map { $0! } } }
}
