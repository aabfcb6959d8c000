import FanoutTestSupport
import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// The sample v2 snapshot in a file of its own, settled (old enough to cache).
private func settledSnapshot() -> String {
  let snapshot = SQLiteFixture.make(
    readText(datasetURL("sample-v2/snapshot.sql").path), schema: SQLiteFixture.v2Schema)
  Thread.sleep(forTimeInterval: 2.1)
  return snapshot
}

private let traffic = datasetURL("sample-v2/traffic.ndjson").path

private func eval(_ snapshot: String, _ extra: [String], environment: [String: String] = [:])
  -> (result: ProcessResult, out: String)
{
  let out = makeTemporaryDirectory() + "/out"
  let result = runProcess(
    fanoutExecutable,
    ["eval", "--snapshot", snapshot, "--messages", traffic, "--out", out, "--decisions"] + extra,
    environment: environment)
  return (result, out)
}

private func decisions(_ out: String) -> String? {
  lz4CommandLineDecode(out + "/decisions.ndjson.lz4")
}

private func mode(_ path: String) -> mode_t {
  var st = stat()
  return lstat(path, &st) == 0 ? st.st_mode & 0o7777 : 0
}

/// The uid of `nobody`, the attacker in these tests; nil where files
/// cannot be given to another user (not root).
private let attacker: uid_t? = geteuid() == 0 ? 65534 : nil

@Suite("trust nothing on disk Fanout did not write")
struct HostileDiskTests {
  @Test("an index cache folder another user owns or can write is not used, with one warning")
  func untrustedCacheFolder() throws {
    let snapshot = settledSnapshot()
    let expected = decisions(eval(snapshot, ["--no-index-cache"]).out)
    try #require(expected?.isEmpty == false)
    let home = makeTemporaryDirectory("fanout-hostile")
    chmod(home, 0o1777)
    var cases: [(String, () -> Void)] = [
      (
        "writable by others",
        {
          mkdir(home + "/fanout", 0o700)
          chmod(home + "/fanout", 0o777)
        }
      ),
      (
        "a link to a folder",
        {
          let target = makeTemporaryDirectory("fanout-link-target")
          symlink(target, home + "/fanout")
        }
      ),
    ]
    if let attacker {
      cases.append(
        (
          "owned by another user",
          {
            mkdir(home + "/fanout", 0o700)
            chown(home + "/fanout", attacker, attacker)
          }
        ))
    } else {
      print("skipped: giving a folder to another user needs root")
    }
    for (name, plant) in cases {
      _ = runProcess("/bin/rm", ["-rf", home + "/fanout"])
      plant()
      let before = listDirectory(home + "/fanout")
      for _ in 0..<2 {
        let (run, out) = eval(snapshot, [], environment: ["XDG_CACHE_HOME": home])
        #expect(run.status == 0, "\(name): \(run.stderr)")
        #expect(decisions(out) == expected, "\(name)")
        let lines = run.stderr.split(separator: "\n")
        #expect(lines.count == 1 && lines[0].contains("is not used"), "\(name): \(run.stderr)")
      }
      #expect(listDirectory(home + "/fanout") == before, "\(name): a file was written there")
    }
  }

  /// The warning names the folder, whose path came from the environment:
  /// its control characters are shown, not sent to the terminal.
  @Test("the warning about an untrusted cache folder shows the control characters of its path")
  func untrustedCacheFolderNamedWithEscape() throws {
    let snapshot = settledSnapshot()
    let home = makeTemporaryDirectory("fanout-hostile") + "/x\u{1B}[31my"
    #expect(mkdir(home, 0o700) == 0 && mkdir(home + "/fanout", 0o700) == 0)
    chmod(home + "/fanout", 0o777)
    let (run, _) = eval(snapshot, [], environment: ["XDG_CACHE_HOME": home])
    #expect(run.status == 0, "\(run.stderr)")
    #expect(run.stderr.contains("x\\u{1B}[31my/fanout' is not used"), "\(run.stderr)")
    #expect(!run.stderr.contains("\u{1B}"))
  }

  @Test("cache files are written 0600 in a 0700 folder; compile --out no wider than the snapshot")
  func compiledFileModes() throws {
    let snapshot = settledSnapshot()
    let home = makeTemporaryDirectory("fanout-modes")
    let (run, _) = eval(snapshot, [], environment: ["XDG_CACHE_HOME": home])
    #expect(run.status == 0, "\(run.stderr)")
    #expect(mode(home + "/fanout") == 0o700)
    let files = listDirectory(home + "/fanout")
    try #require(files.count == 1)
    #expect(mode(home + "/fanout/" + files[0]) == 0o600)

    for (snapshotMode, expected): (mode_t, mode_t) in [
      (0o600, 0o600), (0o640, 0o640), (0o644, 0o644),
    ] {
      chmod(snapshot, snapshotMode)
      let compiled = makeTemporaryDirectory() + "/x.fanout-index"
      let compile = runProcess(
        fanoutExecutable, ["snapshot", "compile", snapshot, "--out", compiled])
      #expect(compile.status == 0, "\(compile.stderr)")
      #expect(mode(compiled) == expected, "snapshot \(String(snapshotMode, radix: 8))")
    }
  }

  @Test("a cache file another user owns is not read")
  func foreignCacheFile() throws {
    guard let attacker else {
      print("skipped: giving a file to another user needs root")
      return
    }
    let snapshot = settledSnapshot()
    let home = makeTemporaryDirectory("fanout-foreign")
    let (first, out) = eval(snapshot, [], environment: ["XDG_CACHE_HOME": home])
    #expect(first.status == 0)
    let file = home + "/fanout/" + (try #require(listDirectory(home + "/fanout").first))
    chown(file, attacker, attacker)
    let (run, again) = eval(snapshot, [], environment: ["XDG_CACHE_HOME": home])
    #expect(run.status == 0)
    #expect(run.stderr.contains("is not used"), "\(run.stderr)")
    #expect(decisions(again) == decisions(out))
  }

  @Test("a lock file that is a symbolic link is refused (73); its target is untouched")
  func lockSymlink() throws {
    let snapshot = settledSnapshot()
    let victim = makeTemporaryDirectory() + "/victim"
    FileManager.default.createFile(atPath: victim, contents: Data("precious\n".utf8))
    let out = makeTemporaryDirectory() + "/o"
    mkdir(out, 0o755)
    symlink(victim, out + "/.fanout.lock")
    let run = runProcess(
      fanoutExecutable,
      ["eval", "--snapshot", snapshot, "--messages", traffic, "--out", out, "--no-index-cache"])
    #expect(run.status == 73, "\(run.stderr)")
    #expect(run.stderr.contains("symbolic link"), "\(run.stderr)")
    #expect(readText(victim) == "precious\n")

    // prefs apply's lock beside the snapshot, likewise.
    let changes = makeTemporaryDirectory() + "/changes.json"
    FileManager.default.createFile(
      atPath: changes, contents: Data(#"[{"user_id":"ana","chat_level":"none"}]"#.utf8))
    let dir = (snapshot as NSString).deletingLastPathComponent
    let name = (snapshot as NSString).lastPathComponent
    let missing = dir + "/absent-target"
    symlink(missing, dir + "/." + name + ".lock")
    let apply = runProcess(
      fanoutExecutable, ["prefs", "apply", "--snapshot", snapshot, "--format", "stream", changes])
    #expect(apply.status == 73, "\(apply.stderr)")
    #expect(!FileManager.default.fileExists(atPath: missing), "the link's target was created")
  }

  @Test("a snapshot path that is a FIFO or a device is refused before SQLite opens it (66)")
  func notRegularFiles() throws {
    let fifo = makeTemporaryDirectory() + "/snapshot.sqlite"
    #expect(mkfifo(fifo, 0o600) == 0)
    for path in [fifo, "/dev/null", "/dev/urandom"] {
      for command in [
        ["snapshot", "check", path],
        [
          "eval", "--snapshot", path, "--messages", traffic, "--out",
          makeTemporaryDirectory() + "/o",
        ],
      ] {
        let run = runProcess(fanoutExecutable, command)
        #expect(run.status == 66, "\(command): \(run.stderr)")
        #expect(run.stderr.contains("not a regular file"), "\(run.stderr)")
      }
    }
  }
}

/// Section numbers in a compiled snapshot file (CompiledSnapshot.write,
/// Index.write(to:)): seven of the snapshot's description, then the index.
private enum Section {
  static let userDND = 13
  static let channelMembers = 25
  static let memberUser = 26
}

@Suite("a crafted compiled index is refused whole, never read out of bounds")
struct CraftedIndexTests {
  /// Each crafted file: (what was changed, the change).
  static let crafts: [(String, @Sendable (inout CompiledIndexEditor) -> Void)] = [
    ("a member's user row far out of range", { $0.set(Section.memberUser, 0, to: Int32.max) }),
    (
      "a member's user row just out of range",
      {
        let users = $0.values(Section.memberUser, as: Int32.self).max()!
        $0.set(Section.memberUser, 1, to: users + 1)
      }
    ),
    (
      "a channel's member offset past the end",
      {
        let offsets = $0.values(Section.channelMembers, as: Int.self)
        $0.set(Section.channelMembers, offsets.count / 2, to: offsets.last! + 1000)
      }
    ),
    (
      "a DND pattern just past the last",
      {
        let dnd = $0.values(Section.userDND, as: Int32.self)
        $0.set(Section.userDND, dnd.firstIndex(of: -1) ?? 0, to: dnd.max()! + 1)
      }
    ),
  ]

  @Test("given as the snapshot: exit 65; planted in the cache: removed and rebuilt")
  func refused() throws {
    let snapshot = settledSnapshot()
    let expected = decisions(eval(snapshot, ["--no-index-cache"]).out)
    let compiled = makeTemporaryDirectory() + "/x.fanout-index"
    let compile = runProcess(
      fanoutExecutable, ["snapshot", "compile", snapshot, "--out", compiled])
    try #require(compile.status == 0, "\(compile.stderr)")
    let pristine = try #require(CompiledIndexEditor(path: compiled))
    // The sections are the ones named: the member rows are one per `members` row.
    let members = runProcess("/usr/bin/sqlite3", [snapshot, "SELECT count(*) FROM members"]).text
    #expect(
      "\(pristine.values(Section.memberUser, as: Int32.self).count)\n" == members, "\(members)")

    let home = makeTemporaryDirectory("fanout-crafted")
    let (filled, _) = eval(snapshot, [], environment: ["XDG_CACHE_HOME": home])
    #expect(filled.status == 0)
    let cached = home + "/fanout/" + (try #require(listDirectory(home + "/fanout").first))
    let cachedPristine = try #require(CompiledIndexEditor(path: cached))

    for (name, craft) in Self.crafts {
      var file = pristine
      craft(&file)
      file.write(to: compiled)
      let (run, _) = eval(compiled, [])
      #expect(run.status == 65, "\(name): \(run.stderr)")
      #expect(run.stderr.contains("damaged"), "\(name): \(run.stderr)")

      var planted = cachedPristine
      craft(&planted)
      planted.write(to: cached)
      chmod(cached, 0o600)
      let (fromCache, out) = eval(snapshot, [], environment: ["XDG_CACHE_HOME": home])
      #expect(fromCache.status == 0, "\(name): \(fromCache.stderr)")
      #expect(fromCache.stderr.contains("is not usable"), "\(name): \(fromCache.stderr)")
      #expect(decisions(out) == expected, "\(name)")
      // Rebuilt from SQLite, and read without complaint next time.
      let (next, _) = eval(snapshot, [], environment: ["XDG_CACHE_HOME": home])
      #expect(next.stderr.isEmpty, "\(name): \(next.stderr)")
    }
  }
}
