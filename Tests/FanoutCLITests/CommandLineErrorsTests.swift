import FanoutTestSupport
import Foundation
import Testing

/// Errors a person meets first say what is wrong, in plain words, with the
/// right exit code.
@Suite("Clear words for command-line errors")
struct CommandLineErrorsTests {
  static let snapshot = SQLiteFixture.make(readText(datasetURL("sample/snapshot.sql").path))
  static let traffic = datasetURL("sample/traffic.ndjson").path

  @Test(
    "numbers out of range are named, not taken for options",
    arguments: [
      (["eval", "--threads", "-1"], "--threads must be at least 1"),
      (["eval", "--threads", "100000"], "--threads must be at most 1024"),
      (["eval", "--busy-timeout", "-5"], "--busy-timeout must be at least 0"),
      (["gen", "--users", "-5", "--messages", "1"], "--users must be at least 2"),
      (["gen", "--users", "9223372036854775807", "--messages", "1"], "--users must be at most"),
      (["gen", "--users", "5", "--messages", "4000000000"], "--messages must be at most"),
      (["stream", "--batch-ms", "-1"], "--batch-ms must be greater than 0"),
      // Durations and sizes a conversion would trap on.
      (["stream", "--batch-ms", "inf"], "--batch-ms must be greater than 0 and at most"),
      (["stream", "--rotate-mb", "1e300"], "--rotate-mb must be greater than 0 and at most"),
      (["stream", "--status-seconds", "1e10"], "--status-seconds must be greater than 0 and at"),
      (["stream", "--watch-seconds", "nan"], "--watch-seconds must be greater than 0 and at most"),
      (["stream", "--threads", "0"], "--threads must be at least 1"),
      (["stream", "--batch-messages", "9223372036854775807"], "--batch-messages must be at most"),
      // Negative numbers are values, not options, for every number option.
      (["audit", "--tolerance-ms", "-5"], "--tolerance-ms must be at least 0"),
      (["whatif", "--budget", "-1"], "--budget must be at least 0"),
      (["prefs", "apply", "--busy-timeout", "-1"], "--busy-timeout must be at least 0"),
      (["snapshot", "split", "--shards", "-2"], "--shards must be at least 1"),
      (["gen", "--users", "5", "--messages", "1", "--seed", "-1"], "'-1' is invalid for '--seed"),
    ])
  func numbers(_ arguments: [String], _ message: String) {
    let out = makeTemporaryDirectory() + "/out"
    let common =
      switch arguments[0] {
      case "gen": ["--out", out]
      case "stream": ["--snapshot", Self.snapshot, "--out", out]
      case "prefs": ["--snapshot", Self.snapshot, "--format", "stream", out + ".json"]
      case "snapshot": [Self.snapshot, "--out", out]
      case "audit":
        [
          "--snapshot", Self.snapshot, "--messages", Self.traffic, "--out", out, "--sent",
          Self.traffic,
        ]
      case "whatif":
        [
          "--snapshot", Self.snapshot, "--messages", Self.traffic, "--out", out, "--sql",
          "SELECT 1",
        ]
      default: ["--snapshot", Self.snapshot, "--messages", Self.traffic, "--out", out]
      }
    let result = runProcess(fanoutExecutable, arguments + common, input: [])
    #expect(result.status == 64, "\(result.stderr)")
    #expect(result.stderr.contains(message), "\(result.stderr)")
    #expect(!result.stderr.contains("Missing value"))
    #expect(!FileManager.default.fileExists(atPath: out))
  }

  @Test("gen --out naming a file, --version, exit codes in each command's help")
  func words() throws {
    let file = makeTemporaryDirectory() + "/plain"
    try "x".write(toFile: file, atomically: true, encoding: .utf8)
    let gen = runProcess(
      fanoutExecutable, ["gen", "--users", "5", "--messages", "5", "--out", file])
    #expect(gen.status == 64)
    #expect(gen.stderr.contains("'\(file)' is not a folder"), "\(gen.stderr)")

    let version = runProcess(fanoutExecutable, ["--version"])
    #expect(version.status == 0)
    #expect(version.text.hasPrefix("fanout "))

    for command in [
      ["eval"], ["whatif"], ["stream"], ["explain"], ["prefs", "apply"], ["prefs", "get"],
      ["snapshot", "check"], ["gen"],
    ] {
      let help = runProcess(fanoutExecutable, command + ["--help"])
      #expect(help.status == 0)
      #expect(help.text.contains("Exit codes"), "\(command)")
    }
    let whatifHelp = runProcess(fanoutExecutable, ["whatif", "--help"]).text
    #expect(
      whatifHelp.replacingOccurrences(of: "\n", with: " ").contains(
        "exactly one of the two is required"))
  }

  @Test("malformed JSON in prefs apply is located by line and column")
  func malformedChanges() throws {
    let dir = makeTemporaryDirectory()
    let snapshot = dir + "/s.sqlite"
    try FileManager.default.copyItem(atPath: Self.snapshot, toPath: snapshot)
    let before = FileManager.default.contents(atPath: snapshot)
    let result = runProcess(
      fanoutExecutable, ["prefs", "apply", "--snapshot", snapshot, "--format", "stream", "-"],
      input: Array(#"{"preferences":["#.utf8) + [0x0A] + Array(#"{"user_id":"alice" "x":1}]}"#.utf8)
    )
    #expect(result.status == 65)
    #expect(
      result.stderr.contains("line 2, column 20: invalid JSON: expected '}'"), "\(result.stderr)")
    #expect(FileManager.default.contents(atPath: snapshot) == before)
  }

  @Test("a traffic line that starts with a byte order mark says so")
  func byteOrderMark() throws {
    let dir = makeTemporaryDirectory()
    let traffic = dir + "/bom.ndjson"
    try Data([0xEF, 0xBB, 0xBF] + Array(#"{"id":"m","channel":"messaging:general","ts":1}"#.utf8))
      .write(to: URL(fileURLWithPath: traffic))
    let result = runProcess(
      fanoutExecutable,
      ["eval", "--snapshot", Self.snapshot, "--messages", traffic, "--out", dir + "/out"])
    #expect(result.status == 0)
    #expect(readText(dir + "/out/rejected.ndjson").contains("UTF-8 byte order mark"))
  }

  /// ArgumentParser takes a value starting with "-" for an option unless
  /// told otherwise: SQL opening with a comment, ids, times before 1970.
  @Test(
    "values that start with a dash are values",
    arguments: [
      (["whatif", "--sql", "-- no comment is an option", "--sql", "SELECT 1"], 0, "B is A"),
      (["prefs", "get", "--user", "-bob"], 64, "unknown user '-bob'"),
      (["explain", "--id", "-m1", "--user", "alice"], 66, "no message with id '-m1'"),
    ])
  func dashedValues(_ arguments: [String], _ status: Int32, _ message: String) {
    let out = makeTemporaryDirectory() + "/out"
    let common =
      switch arguments[0] {
      case "whatif": ["--snapshot", Self.snapshot, "--messages", Self.traffic, "--out", out]
      case "explain": ["--snapshot", Self.snapshot, "--messages", Self.traffic]
      default: ["--snapshot", Self.snapshot]
      }
    let result = runProcess(fanoutExecutable, arguments + common)
    #expect(result.status == status, "\(result.stderr)")
    #expect((result.text + result.stderr).contains(message), "\(result.text)\(result.stderr)")
    #expect(!result.stderr.contains("Missing value"))
  }

  @Test("a budget too large for tenths of a push has nobody over it, and no trap")
  func largestBudget() throws {
    let out = makeTemporaryDirectory() + "/out"
    let result = runProcess(
      fanoutExecutable,
      [
        "whatif", "--snapshot", Self.snapshot, "--messages", Self.traffic, "--out", out,
        "--sql", "UPDATE users SET dnd_start = NULL, dnd_end = NULL", "--budget", "\(Int.max)",
      ])
    #expect(result.status == 0, "\(result.stderr)")
    let report = try #require(
      try JSONSerialization.jsonObject(with: Data(readText(out + "/report.json").utf8))
        as? [String: Any])
    #expect(report["budget"] as? Int == Int.max)
    let pushes = try #require(report["pushes_per_user_per_day"] as? [String: [String: Any]])
    for side in ["a", "b"] {
      #expect(pushes[side]?["over_budget"] as? Int == 0, "\(pushes)")
      #expect((pushes[side]?["users"] as? Int ?? 0) > 0, "\(pushes)")
    }
  }

  /// Ids are someone else's text: one holding an escape sequence must not
  /// recolour or rewrite the reader's terminal.
  @Test("control characters in ids are shown, not sent to the terminal")
  func controlCharacters() throws {
    let snapshot = SQLiteFixture.make(
      readText(datasetURL("sample/snapshot.sql").path)
        + "\nINSERT INTO users (user_id) VALUES ('ev' || char(27) || '[31mil');")
    let found = runProcess(
      fanoutExecutable, ["prefs", "get", "--snapshot", snapshot, "--user", "ev\u{1B}[31mil"])
    #expect(found.status == 0, "\(found.stderr)")
    #expect(found.text.hasPrefix("user ev\\u{1B}[31mil\n"), "\(found.text)")
    #expect(!found.text.contains("\u{1B}"))
    let missing = runProcess(
      fanoutExecutable, ["prefs", "get", "--snapshot", snapshot, "--user", "no\u{1B}]0;x\u{07}"])
    #expect(missing.status == 64)
    #expect(missing.stderr.contains("unknown user 'no\\u{1B}]0;x\\u{7}'"), "\(missing.stderr)")
    #expect(!missing.stderr.contains("\u{1B}"))
  }

  /// Every error names what someone else may have made — here a file in a
  /// shared output folder, named with an escape sequence, and an argument
  /// pasted from elsewhere — and is shown, not sent to the terminal.
  @Test("control characters in any error on standard error are shown, not sent")
  func controlCharactersInErrors() throws {
    let snapshot = SQLiteFixture.make(readText(datasetURL("sample/snapshot.sql").path))
    let traffic = datasetURL("sample/traffic.ndjson").path
    let out = makeTemporaryDirectory()
    try "".write(toFile: out + "/a\u{1B}]0;pwned\u{07}b", atomically: false, encoding: .utf8)
    let listed = runProcess(
      fanoutExecutable, ["eval", "--snapshot", snapshot, "--messages", traffic, "--out", out])
    #expect(listed.status == 64)
    #expect(listed.stderr.contains("it holds a\\u{1B}]0;pwned\\u{7}b"), "\(listed.stderr)")
    let variant = runProcess(
      fanoutExecutable,
      [
        "whatif", "--snapshot", snapshot, "--messages", traffic, "--out", makeTemporaryDirectory(),
        "--variant", "x\u{1B}[31my=a.sql", "--variant", "b=b.sql",
      ])
    #expect(variant.status == 64)
    #expect(variant.stderr.contains("--variant 'x\\u{1B}[31my=a.sql'"), "\(variant.stderr)")
    for result in [listed, variant] { #expect(!result.stderr.contains("\u{1B}")) }
  }

  /// An argument's bad bytes would be replaced (U+FFFD) before any command
  /// sees it: SQL would silently say something else.
  @Test("an argument that is not UTF-8 is refused, naming it, before anything runs")
  func argumentNotUTF8() {
    let out = makeTemporaryDirectory() + "/out"
    // A shell passes the Latin-1 byte through; Swift's strings cannot.
    let result = runProcess(
      "/bin/sh",
      [
        "-c",
        #""$0" whatif --snapshot "$1" --messages "$2" --out "$3" --sql "$(printf "UPDATE users SET chat_level = 'none' WHERE user_id = 'caf\351'")""#,
        fanoutExecutable, Self.snapshot, Self.traffic, out,
      ])
    #expect(result.status == 64, "\(result.stderr)")
    #expect(
      result.stderr.hasPrefix(
        "fanout: error: argument 9 ('UPDATE users SET chat_level = 'none' WHERE"),
      "\(result.stderr)")
    #expect(result.stderr.contains("is not UTF-8 text"), "\(result.stderr)")
    #expect(!FileManager.default.fileExists(atPath: out))
  }

  /// The argument is echoed as any refused value is: bounded, its control
  /// characters shown.
  @Test("a long argument that is not UTF-8 is named in a bounded message")
  func longArgumentNotUTF8() {
    let result = runProcess(
      "/bin/sh",
      [
        "-c",
        #""$0" explain --snapshot "$1" --user "$(head -c 100000 /dev/zero | tr '\0' x)$(printf '\033\351')""#,
        fanoutExecutable, Self.snapshot,
      ])
    #expect(result.status == 64, "\(result.stderr)")
    #expect(result.stderr.hasPrefix("fanout: error: argument 5 ('xxx"), "\(result.stderr)")
    #expect(result.stderr.contains("(100004 bytes)"), "\(result.stderr)")
    #expect(result.stderr.utf8.count < 1_000, "\(result.stderr.utf8.count) bytes")
  }
}

@Suite("names the outputs reserve")
struct ReservedNameTests {
  @Test(
    "a device gateway named after an output of the stage or a run is refused (65)",
    arguments: ["batches", "decisions", "summary", "rejected"])
  func gateway(_ name: String) {
    let snapshot = SQLiteFixture.make(
      SQLiteFixture.header + """
        INSERT INTO users (user_id) VALUES ('u1');
        INSERT INTO devices VALUES (1, 'u1', '\(name)', 't1');
        """)
    let check = runProcess(fanoutExecutable, ["snapshot", "check", snapshot])
    #expect(check.status == 65, "\(check.stderr)")
    #expect(check.stderr.contains("table devices") && check.stderr.contains("column gateway"))
    #expect(check.stderr.contains("'\(name)' is not a valid name"), "\(check.stderr)")
  }

  @Test(
    "--input naming one of the stage's own output streams is refused (64)",
    arguments: ["fanout:rejected", "fanout:batches", "fanout:apns", "out:batches"])
  func ownOutput(_ input: String) {
    let prefix = input.hasPrefix("out:") ? ["--out-prefix", "out"] : []
    let result = runProcess(
      fanoutExecutable,
      [
        "stream", "--snapshot", CommandLineErrorsTests.snapshot, "--redis", "redis://127.0.0.1:1",
        "--input", input, "--group", "g",
      ] + prefix)
    #expect(result.status == 64, "\(result.stderr)")
    #expect(result.stderr.contains("one of the stage's own output streams"), "\(result.stderr)")
  }
}

@Suite("values echoed in errors and rejected lines are bounded")
struct BoundedMessageTests {
  static let huge = String(repeating: "x", count: 1 << 20)

  @Test("a 1 MiB unknown channel name: its rejected line and the run's output stay small")
  func rejectedLine() throws {
    let dir = makeTemporaryDirectory()
    let traffic = dir + "/traffic.ndjson"
    try (#"{"id":"m1","channel":"\#(Self.huge)","ts":1}"# + "\n").write(
      toFile: traffic, atomically: true, encoding: .utf8)
    let out = dir + "/out"
    let run = runProcess(
      fanoutExecutable,
      ["eval", "--snapshot", CommandLineErrorsTests.snapshot, "--messages", traffic, "--out", out])
    #expect(run.status == 0, "\(run.stderr)")
    let rejected = readText(out + "/rejected.ndjson")
    #expect(rejected.utf8.count < 400, "\(rejected.utf8.count) bytes")
    #expect(rejected.contains("… (1048576 bytes)"), "\(rejected.prefix(300))")
    #expect(run.stderr.utf8.count < 2000)
  }

  @Test("a 1 MiB user id in a snapshot or a change: the error names a cut of it")
  func errors() throws {
    let snapshot = SQLiteFixture.make(
      SQLiteFixture.header + """
        INSERT INTO channels VALUES ('c', 'group');
        INSERT INTO members VALUES ('c', '\(Self.huge)');
        """)
    let check = runProcess(fanoutExecutable, ["snapshot", "check", snapshot])
    #expect(check.status == 65)
    #expect(check.stderr.utf8.count < 1000, "\(check.stderr.utf8.count) bytes")
    #expect(check.stderr.contains("… (1048576 bytes)"), "\(check.stderr.prefix(300))")

    let apply = runProcess(
      fanoutExecutable,
      ["prefs", "apply", "--snapshot", CommandLineErrorsTests.snapshot, "--format", "stream", "-"],
      input: Array(#"{"preferences":[{"user_id":"\#(Self.huge)","chat_level":"none"}]}"#.utf8))
    #expect(apply.status == 65)
    #expect(apply.stderr.utf8.count < 1000, "\(apply.stderr.utf8.count) bytes")
    #expect(apply.stderr.contains("… (1048576 bytes)"), "\(apply.stderr.prefix(300))")
  }
}

@Suite("one command line, one error style")
struct CommandLineStyleTests {
  @Test("no arguments: the help on stderr and exit 64")
  func noArguments() {
    let run = runProcess(fanoutExecutable, [])
    #expect(run.status == 64)
    #expect(run.stderr.contains("SUBCOMMANDS:") && run.stderr.contains("eval"), "\(run.stderr)")
  }

  @Test("a bad command line: fanout: error: …, the usage, a near miss named")
  func style() {
    let run = runProcess(
      fanoutExecutable,
      ["eval", "--snapshot", "s", "--messages", "m", "--out", "o", "--thread", "2"])
    #expect(run.status == 64)
    let lines = run.stderr.split(separator: "\n")
    #expect(lines.first == "fanout: error: Unknown option '--thread'. Did you mean '--threads'?")
    #expect(lines.contains { $0.hasPrefix("usage: fanout eval --snapshot") }, "\(run.stderr)")
    #expect(!run.stderr.contains("Error: "))

    let file = runProcess(
      fanoutExecutable,
      [
        "explain", "--snapshot", CommandLineErrorsTests.snapshot, "--user", "alice", "--message",
        CommandLineErrorsTests.traffic,
      ])
    #expect(file.status == 64)
    #expect(file.stderr.contains("did you mean --messages"), "\(file.stderr)")
  }

  @Test("snapshot check, compile and split take --snapshot like every command, or the file")
  func snapshotOption() {
    let snapshot = CommandLineErrorsTests.snapshot
    let positional = runProcess(
      fanoutExecutable, ["snapshot", "check", snapshot, "--no-index-cache"])
    let option = runProcess(
      fanoutExecutable, ["snapshot", "check", "--snapshot", snapshot, "--no-index-cache"])
    #expect(positional.status == 0 && option.status == 0, "\(option.stderr)")
    #expect(positional.text == option.text)
    let both = runProcess(
      fanoutExecutable, ["snapshot", "check", snapshot, "--snapshot", snapshot])
    #expect(both.status == 64)
    let neither = runProcess(fanoutExecutable, ["snapshot", "check"])
    #expect(neither.status == 64 && neither.stderr.contains("--snapshot FILE"), "\(neither.stderr)")
    let out = makeTemporaryDirectory() + "/shards"
    let split = runProcess(
      fanoutExecutable,
      ["snapshot", "split", "--snapshot", snapshot, "--shards", "2", "--out", out])
    #expect(split.status == 0, "\(split.stderr)")
  }

  @Test("stream's usage shows what it requires: --out or --redis with --input and --group")
  func streamUsage() {
    let help = runProcess(fanoutExecutable, ["stream", "--help"]).text
    #expect(help.contains("fanout stream --snapshot <file> --out <dir>|-"), "\(help)")
    #expect(help.contains("--redis <url> --input <stream> --group <group>"))
  }
}
