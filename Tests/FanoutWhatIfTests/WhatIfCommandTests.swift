import FanoutTestSupport
import Foundation
import Synchronization
import Testing

private let sampleSnapshot = SQLiteFixture.make(readText(datasetURL("sample/snapshot.sql").path))
private let sampleTraffic = datasetURL("sample/traffic.ndjson").path
private let mentionsOnly =
  "INSERT OR REPLACE INTO settings VALUES ('default_chat_level', 'mentions')"

private func whatif(
  _ extra: [String], out: String, snapshot: String = sampleSnapshot,
  messages: String = sampleTraffic
) -> ProcessResult {
  runProcess(
    fanoutExecutable,
    ["whatif", "--snapshot", snapshot, "--messages", messages, "--out", out] + extra)
}

private func contents(_ path: String) -> Data? { FileManager.default.contents(atPath: path) }

/// Files of SQL that SQLite would not receive as written: a NUL byte (the
/// statements after it were dropped, and B was A) and Latin-1 (replaced).
private let oddSQL: (nul: String, latin1: String) = {
  let dir = makeTemporaryDirectory()
  let files = (nul: dir + "/nul.sql", latin1: dir + "/latin1.sql")
  FileManager.default.createFile(
    atPath: files.nul, contents: Data("SELECT 1;\0UPDATE users SET chat_level = 'none';".utf8))
  FileManager.default.createFile(
    atPath: files.latin1,
    contents: Data("UPDATE users SET chat_level = 'none' WHERE user_id = 'caf".utf8)
      + Data([0xE9, 0x27]))
  return files
}()

@Suite("fanout whatif, end to end")
struct WhatIfCommandTests {
  @Test("A's stored schema is never run as a script: SQL set with writable_schema is refused")
  func storedSchema() throws {
    let dir = makeTemporaryDirectory()
    let snapshot = dir + "/a.sqlite"
    try FileManager.default.copyItem(atPath: sampleSnapshot, toPath: snapshot)
    let escaped = dir + "/escaped.db"
    let plant = runProcess(
      "/usr/bin/sqlite3",
      [
        snapshot,
        "CREATE INDEX i ON users(timezone); PRAGMA writable_schema = ON; "
          + "UPDATE sqlite_master SET sql = 'CREATE INDEX i ON users(timezone); "
          + "ATTACH ''\(escaped)'' AS e; CREATE TABLE e.t(x)' WHERE name = 'i';",
      ])
    #expect(plant.status == 0, "\(plant.stderr)")
    let out = dir + "/out"
    let result = whatif(
      ["--sql", "UPDATE users SET timezone = 'UTC'", "--no-index-cache"], out: out,
      snapshot: snapshot)
    #expect(result.status != 0)
    #expect(result.stderr.contains("stored schema for table 'users'"), "\(result.stderr)")
    #expect(!FileManager.default.fileExists(atPath: escaped), "the stored SQL was run")
    #expect(!FileManager.default.fileExists(atPath: out))
  }

  @Test("writes the four files, readable by the lz4 tool, and prints the headline deltas")
  func files() throws {
    let out = makeTemporaryDirectory() + "/out"
    let result = whatif(["--sql", mentionsOnly], out: out)
    #expect(result.status == 0, "\(result.stderr)")
    // Its rejected lines said on stderr, as eval says them.
    #expect(
      result.stderr.contains("6 of 21 traffic lines rejected (the first, line 7:"),
      "\(result.stderr)")
    #expect(
      listDirectory(out) == ["changes.ndjson.lz4", "rejected.ndjson", "report.html", "report.json"])
    let changes = try #require(lz4CommandLineDecode(out + "/changes.ndjson.lz4"))
    #expect(changes.hasPrefix(#"{"message":"m1","user":"bob","a":"message","b":"not_mentioned"}"#))
    #expect(
      readText(out + "/rejected.ndjson")
        == readText(datasetURL("sample/expected/rejected.ndjson").path))
    #expect(result.text.contains("delivered"))
    #expect(result.text.contains("not_mentioned"))
    // A headline that says what happened, as the page's title and heading.
    let headline = try #require(
      result.text.split(separator: "\n").first { $0.hasPrefix("B delivers ") })
    #expect(headline.hasSuffix("pairs change outcome"), "\(headline)")
    #expect(headline.contains("fewer pairs than A (−"), "\(headline)")
    let page = readText(out + "/report.html")
    #expect(page.contains("<title>What if: \(headline)</title>"))
    #expect(page.contains("<h1>\(headline)</h1>"))
    #expect(page.contains("traffic <code>\(sampleTraffic)</code>"))
  }

  @Test(
    "SQL that writes nothing runs: B is A, exit 0, and the run says so",
    arguments: [
      "SELECT 1", "-- only a comment", "", "SELECT count(*) FROM users; /* and */ SELECT 2",
    ])
  func sqlChangingNothing(_ sql: String) throws {
    let out = makeTemporaryDirectory() + "/out"
    // `--sql=…`: a value starting with `--` would read as an option.
    let result = whatif(sql.hasPrefix("--") ? ["--sql=" + sql] : ["--sql", sql], out: out)
    #expect(result.status == 0, "\(result.stderr)")
    #expect(
      result.text.contains("the SQL changed no row, and wrote no table: B is A"), "\(result.text)")
    let report =
      try JSONSerialization.jsonObject(with: try #require(contents(out + "/report.json")))
      as! [String: Any]
    #expect(report["changed_pairs"] as? Int == 0)
    let b = report["b"] as! [String: Any]
    #expect(b["rows_changed"] as? [String: Int] == [:])
    #expect(b["delivered"] as? Int == (report["a"] as! [String: Any])["delivered"] as? Int)
  }

  @Test("the rows the SQL changed, per table, also when a WHERE matches nothing")
  func rowsChanged() throws {
    let out = makeTemporaryDirectory() + "/out"
    let result = whatif(
      [
        "--sql",
        "UPDATE users SET chat_level = 'none' WHERE user_id IN ('alice', 'bob'); "
          + "UPDATE devices SET token = 'x' WHERE user_id = 'nobody'; " + mentionsOnly,
      ], out: out)
    #expect(result.status == 0, "\(result.stderr)")
    #expect(
      result.text.contains("the SQL changed 3 rows (devices 0, settings 1, users 2)"),
      "\(result.text)")
    let report =
      try JSONSerialization.jsonObject(with: try #require(contents(out + "/report.json")))
      as! [String: Any]
    #expect(
      (report["b"] as! [String: Any])["rows_changed"] as? [String: Int]
        == ["devices": 0, "settings": 1, "users": 2])
    #expect(
      readText(out + "/report.html").contains("It changed 3 rows (devices 0, settings 1, users 2).")
    )
  }

  @Test("defer instead of drop: deferred pairs per side, fewer dnd and snoozed")
  func deferral() throws {
    let out = makeTemporaryDirectory() + "/out"
    let result = whatif(
      ["--sql", "INSERT INTO settings VALUES ('default_quiet_action', 'defer')"], out: out)
    #expect(result.status == 0, "\(result.stderr)")
    let report =
      try JSONSerialization.jsonObject(with: try #require(contents(out + "/report.json")))
      as! [String: Any]
    let a = try #require(report["a"] as? [String: Any])
    let b = try #require(report["b"] as? [String: Any])
    #expect(a["deferred"] as? Int == 0)
    #expect((b["deferred"] as? Int ?? 0) > 0)
    let dnd = { (side: [String: Any]) in (side["suppressed"] as! [String: Int])["dnd"]! }
    #expect(dnd(b) < dnd(a))
    #expect((b["delivered"] as! Int) - (a["delivered"] as! Int) > 0)
    #expect(result.text.contains("deferred"))
    // Deliveries move to later hours: A's by hour of delivery are its by
    // hour of message; B's are not.
    func delivered(_ key: String, _ side: String) -> [Int] {
      (report[key] as! [[String: Any]]).map { ($0[side] as! [String: Int])["delivered"]! }
    }
    #expect(delivered("by_delivery_hour_utc", "a") == delivered("by_hour_utc", "a"))
    #expect(delivered("by_delivery_hour_utc", "b") != delivered("by_hour_utc", "b"))
    #expect(delivered("by_delivery_hour_utc", "b").reduce(0, +) == b["delivered"] as! Int)
  }

  @Test("the same bytes with 1 and 3 threads")
  func deterministic() throws {
    // Enough traffic for several parse and evaluation chunks.
    let lines = readText(sampleTraffic).split(separator: "\n", omittingEmptySubsequences: false)
    let big = (0..<3_000).map {
      String(lines[$0 % lines.count]).replacingOccurrences(
        of: "\"id\":\"m", with: "\"id\":\"r\($0)-m")
    }
    let traffic = makeTemporaryDirectory() + "/traffic.ndjson"
    try big.joined(separator: "\n").write(toFile: traffic, atomically: true, encoding: .utf8)
    var runs: [[Data?]] = []
    for threads in ["1", "3"] {
      let out = makeTemporaryDirectory() + "/out"
      let result = whatif(
        ["--sql", mentionsOnly, "--threads", threads], out: out, messages: traffic)
      #expect(result.status == 0, "\(result.stderr)")
      runs.append(
        ["changes.ndjson.lz4", "report.json", "report.html"].map { contents(out + "/" + $0) })
    }
    #expect(runs[0].allSatisfy { $0 != nil })
    #expect(runs[0] == runs[1])
  }

  @Test("--sql-file runs a file's SQL (comments included), before any --sql")
  func sqlFile() {
    let file = datasetURL("scenarios/quiet-hours-22-08.sql").path
    var reports: [Data?] = []
    for arguments in [
      ["--sql-file", file, "--sql", mentionsOnly],
      ["--sql=" + readText(file) + ";\n" + mentionsOnly],  // it starts with "--"
      ["--sql", mentionsOnly],
    ] {
      let out = makeTemporaryDirectory() + "/out"
      let result = whatif(arguments, out: out)
      #expect(result.status == 0, "\(result.stderr)")
      reports.append(contents(out + "/changes.ndjson.lz4"))
    }
    #expect(reports[0] != nil)
    #expect(reports[0] == reports[1])
    #expect(reports[0] != reports[2])  // the file's SQL did run
  }

  @Test("report.html stands alone: no scripts, no external resources, charts as SVG")
  func selfContainedHTML() throws {
    let out = makeTemporaryDirectory() + "/out"
    #expect(whatif(["--sql", mentionsOnly], out: out).status == 0)
    let html = readText(out + "/report.html")
    #expect(html.hasPrefix("<!DOCTYPE html>"))
    #expect(!html.contains("<script"))
    #expect(!html.contains("<link"))
    #expect(!html.contains("@import"))
    #expect(!html.contains("url("))
    let addresses = html.components(separatedBy: "http").count - 1
    let svgNamespaces = html.components(separatedBy: "http://www.w3.org/2000/svg").count - 1
    #expect(addresses == svgNamespaces)
    // Charts: hour of message, its B − A, hour of delivery, local hour, size, gateway.
    #expect(html.components(separatedBy: "<svg ").count - 1 == 6)
    #expect(html.contains(#"aria-label="B − A: delivered pairs by UTC hour of the message""#))
    // Links to the files beside it; reasons with their definitions.
    #expect(
      html.contains(#"<a href="report.json">"#) && html.contains(#"<a href="changes.ndjson.lz4">"#))
    #expect(
      html.contains("inside the recipient&#39;s do-not-disturb hours")
        || html.contains("inside the recipient's do-not-disturb hours"))
    #expect(html.contains("messaging:general"))  // the channel that changes most
  }

  /// Refusals: exit code, message, nothing written, A untouched.
  @Test(
    "bad scenarios are clear errors and leave A alone",
    arguments: [
      (["--sql", "UPDATE nosuch SET x = 1"], 64, "--sql failed: no such table: nosuch"),
      (
        ["--sql", "UPDATE users SET chat_level = 'loud' WHERE user_id = 'alice'"], 65,
        "snapshot A with --sql applied: snapshot refused: table users, row user_id='alice', column chat_level"
      ),
      (
        ["--sql", "INSERT INTO users (user_id) VALUES ('zed')"], 65,
        "snapshots A and B cannot be compared: their users differ (A has 16, B has 17)"
      ),
      (
        [
          "--sql",
          "DELETE FROM channel_prefs WHERE channel_id = 'dm:alice-bob'; DELETE FROM members WHERE channel_id = 'dm:alice-bob'; DELETE FROM channels WHERE channel_id = 'dm:alice-bob'",
        ],
        65,
        "their channels differ ('dm:alice-bob' in A where B has 'messaging:general')"
      ),
      (["--sql", mentionsOnly, "--against", "x.sqlite"], 64, "exactly one of --against"),
      ([], 64, "exactly one of --against"),
      (
        ["--sql-file", "/nonexistent/x.sql"], 64,
        "fanout: error: cannot read --sql-file '/nonexistent/x.sql': No such file or directory"
      ),
    ])
  func refused(_ arguments: [String], _ code: Int32, _ message: String) throws {
    let before = contents(sampleSnapshot)
    let out = makeTemporaryDirectory() + "/out"
    let result = whatif(arguments, out: out)
    #expect(result.status == code, "\(result.stderr)")
    #expect(result.stderr.contains(message), "\(result.stderr)")
    #expect(!FileManager.default.fileExists(atPath: out))
    #expect(contents(sampleSnapshot) == before)
  }

  @Test(
    "a file of SQL that would not reach SQLite as written is refused, not cut or repaired",
    arguments: [
      (["--sql-file", oddSQL.nul], "--sql-file '\(oddSQL.nul)': not SQL text: byte 10 is NUL"),
      (
        ["--sql-file", oddSQL.latin1],
        "--sql-file '\(oddSQL.latin1)': not SQL text: byte 58 is not UTF-8"
      ),
      (["--sql-file", "/dev/zero"], "--sql-file '/dev/zero': larger than 256 MiB"),
      (
        ["--variant", "a=\(oddSQL.nul)", "--variant", "b=\(oddSQL.latin1)"],
        "--variant a's file '\(oddSQL.nul)': not SQL text: byte 10 is NUL"
      ),
    ])
  func oddSQLFiles(_ arguments: [String], _ message: String) throws {
    let out = makeTemporaryDirectory() + "/out"
    let result = whatif(arguments, out: out)
    #expect(result.status == 64, "\(result.stderr)")
    #expect(result.stderr.contains("fanout: error: cannot read " + message), "\(result.stderr)")
    #expect(!FileManager.default.fileExists(atPath: out))
  }

  /// `--sql` can touch only its private copy of A: no other file is read,
  /// changed or created, A stays byte for byte, the temporary copy is removed.
  @Test(
    "--sql is confined to the private copy",
    arguments: [
      ("ATTACH DATABASE '{A}' AS orig; UPDATE orig.users SET chat_level = 'none'", "--sql refused"),
      ("VACUUM INTO '{DIR}/elsewhere.db'", "--sql refused"),
      ("/* a comment */ vacuum", "--sql refused"),
      ("ATTACH '{DIR}/new.db' AS e; CREATE TABLE e.t(x)", "--sql refused"),
      ("PRAGMA journal_mode = WAL", "--sql refused"),
      ("UPDATE users SET chat_level = 'none'; DETACH DATABASE main", "--sql refused"),
      ("SELECT load_extension('{DIR}/x.so')", "--sql failed"),
      ("BEGIN; UPDATE users SET chat_level = 'none'", "leaves a transaction open"),
      ("SAVEPOINT s; UPDATE users SET chat_level = 'none'", "leaves a transaction open"),
    ])
  func confined(_ template: String, _ message: String) throws {
    let dir = makeTemporaryDirectory()
    let temporary = makeTemporaryDirectory()
    let sql = template.replacingOccurrences(of: "{A}", with: sampleSnapshot)
      .replacingOccurrences(of: "{DIR}", with: dir)
    let before = contents(sampleSnapshot)
    let out = makeTemporaryDirectory() + "/out"
    let result = runProcess(
      fanoutExecutable,
      [
        "whatif", "--snapshot", sampleSnapshot, "--messages", sampleTraffic, "--out", out,
        "--sql", sql,
      ], environment: ["TMPDIR": temporary])
    #expect(result.status == 64, "\(result.stderr)")
    #expect(result.stderr.contains(message), "\(result.stderr)")
    #expect(contents(sampleSnapshot) == before)
    #expect(listDirectory(dir).isEmpty)
    #expect(listDirectory(temporary).isEmpty)
    #expect(!FileManager.default.fileExists(atPath: out))
  }

  /// SQL that never ends (a recursive CTE without a bound) is stopped at
  /// `--sql-timeout`, on an overlay or a whole copy, alone or as a sweep's
  /// variant; its copy, however large it grew, is removed.
  @Test(
    "SQL that never ends is stopped at --sql-timeout, and its copy removed",
    arguments: [
      (
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) "
          + "INSERT INTO settings SELECT 'k' || x, 'v' FROM c", false
      ),
      (
        "CREATE TABLE t(x); WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) "
          + "INSERT INTO t SELECT x FROM c", false
      ),
      (
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c",
        false
      ),
      (
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) "
          + "INSERT INTO settings SELECT 'k' || x, 'v' FROM c", true
      ),
    ])
  func endlessSQL(_ sql: String, asVariant: Bool) throws {
    let dir = makeTemporaryDirectory()
    let temporary = makeTemporaryDirectory()
    let out = dir + "/out"
    var scenario = ["--sql", sql]
    if asVariant {
      try "UPDATE users SET chat_level = 'mentions';".write(
        toFile: dir + "/defer.sql", atomically: true, encoding: .utf8)
      try sql.write(toFile: dir + "/endless.sql", atomically: true, encoding: .utf8)
      scenario = ["--variant", "defer=\(dir)/defer.sql", "--variant", "endless=\(dir)/endless.sql"]
    }
    // (Under `timeout`: without the limit, the run would never end.)
    let result = runProcess(
      "/usr/bin/timeout",
      [
        "30", fanoutExecutable, "whatif", "--snapshot", sampleSnapshot, "--messages", sampleTraffic,
        "--out", out,
        "--sql-timeout", "1",
      ] + scenario, environment: ["TMPDIR": temporary])
    #expect(result.status == 64, "\(result.stderr)")
    #expect(
      result.stderr.contains(
        (asVariant ? "--variant endless: " : "")
          + "--sql stopped: it ran longer than --sql-timeout (1 s); B was not made"),
      "\(result.stderr)")
    #expect(listDirectory(temporary).isEmpty)
    #expect(!FileManager.default.fileExists(atPath: out))
  }

  @Test("a sweep's failing variant is named")
  func failingVariantNamed() throws {
    let dir = makeTemporaryDirectory()
    try "UPDATE users SET chat_level = 'mentions';".write(
      toFile: dir + "/defer.sql", atomically: true, encoding: .utf8)
    try "UPDATE nosuch SET x = 1;".write(
      toFile: dir + "/typo.sql", atomically: true, encoding: .utf8)
    try "UPDATE users SET chat_level = 'loud' WHERE user_id = 'alice';".write(
      toFile: dir + "/loud.sql", atomically: true, encoding: .utf8)
    for (file, code, message) in [
      ("typo", Int32(64), "--variant typo: --sql failed: no such table: nosuch"),
      ("loud", 65, "--variant loud: snapshot A with --sql applied: snapshot refused: table users"),
    ] {
      let out = dir + "/out-" + file
      let result = whatif(
        ["--variant", "defer=\(dir)/defer.sql", "--variant", "\(file)=\(dir)/\(file).sql"],
        out: out)
      #expect(result.status == code, "\(result.stderr)")
      #expect(result.stderr.contains(message), "\(result.stderr)")
      #expect(!FileManager.default.fileExists(atPath: out))
    }
  }

  @Test("a transaction the SQL closes itself is fine")
  func closedTransaction() {
    let out = makeTemporaryDirectory() + "/out"
    let result = whatif(
      ["--sql", "BEGIN; UPDATE users SET chat_level = 'none'; COMMIT; SAVEPOINT s; RELEASE s"],
      out: out)
    #expect(result.status == 0, "\(result.stderr)")
    #expect(FileManager.default.fileExists(atPath: out + "/report.json"))
  }

  @Test("--against a snapshot with other users is refused")
  func againstOtherUsers() {
    let other = SQLiteFixture.make(
      SQLiteFixture.header + "INSERT INTO users (user_id) VALUES ('u1');")
    let out = makeTemporaryDirectory() + "/out"
    let result = whatif(["--against", other], out: out)
    #expect(result.status == 65)
    #expect(result.stderr.contains("their users differ"), "\(result.stderr)")
    #expect(!FileManager.default.fileExists(atPath: out))
  }

  /// A is loaded and copied for `--sql` in two read transactions; a writer
  /// committing in between must not yield an A and a B from two states
  /// (before the watch, that was exit 65 "their users differ").
  @Test("--sql against a snapshot a writer is changing: the same state for A and B, or busy")
  func writerDuringSQL() throws {
    let dir = makeTemporaryDirectory()
    let snapshot = dir + "/a.sqlite"
    try FileManager.default.copyItem(atPath: sampleSnapshot, toPath: snapshot)
    let setup = SQLiteSession(snapshot)
    #expect(setup.execute("PRAGMA journal_mode = WAL") == nil)
    let stop = Atomic<Bool>(false)
    let writer = Thread {
      let session = SQLiteSession(snapshot)
      var k = 0
      while !stop.load(ordering: .relaxed) {
        session.execute("INSERT INTO users (user_id) VALUES ('zz\(k)')")
        k += 1
        usleep(2_000)
      }
    }
    writer.start()
    var statuses: [Int32] = []
    for run in 0..<4 {
      let result = runProcess(
        fanoutExecutable,
        [
          "whatif", "--snapshot", snapshot, "--messages", sampleTraffic, "--out",
          dir + "/out-\(run)", "--sql", "UPDATE users SET chat_level = 'none'",
        ])
      statuses.append(result.status)
      if result.status == 75 {
        #expect(result.stderr.contains("while A and B were read"), "\(result.stderr)")
      }
    }
    stop.store(true, ordering: .relaxed)
    #expect(statuses.allSatisfy { $0 == 0 || $0 == 75 }, "\(statuses)")
    usleep(50_000)
    let quiet = runProcess(
      fanoutExecutable,
      [
        "whatif", "--snapshot", snapshot, "--messages", sampleTraffic, "--out", dir + "/quiet",
        "--sql", "UPDATE users SET chat_level = 'none'",
      ])
    #expect(quiet.status == 0, "\(quiet.stderr)")
  }
}
