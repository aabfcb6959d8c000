import FanoutGenerator
import FanoutTestSupport
import Foundation
import Testing

@testable import FanoutWhatIf

/// A sweep's variants, each against A in one pass, give exactly what separate
/// `fanout whatif` runs of each give: report.json number for number, and the
/// same changed pairs.
@Suite("fanout whatif --variant: a sweep")
struct SweepTests {
  static func json(_ bytes: [UInt8]) throws -> [String: Any] {
    try #require(try JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any])
  }

  static func changes(_ path: String) throws -> [UInt8] {
    try #require(decodeLZ4Frames(Array(try Data(contentsOf: URL(fileURLWithPath: path)))))
  }

  /// Sweeps `variants` over `data` into `out`, and holds each variant's
  /// report and changed pairs to those of a `whatif` of it alone; returns
  /// the variants' reports, as report.json lists them.
  static func sweepEqualsSeparateRuns(
    _ variants: [WhatIfOptions.Variant], over data: (snapshot: String, traffic: String),
    threads: Int, budget: Int = WhatIfOptions.defaultBudget,
    out: String = makeTemporaryDirectory() + "/sweep"
  ) throws -> [[String: Any]] {
    func options(_ scenario: WhatIfOptions.Scenario, _ out: String) -> WhatIfOptions {
      var options = WhatIfOptions(
        snapshot: data.snapshot, scenario: scenario, messages: data.traffic, out: out,
        threads: threads)
      options.budget = budget
      return options
    }
    let sweep = try WhatIf.sweep(options(.sql(""), out), variants: variants)
    #expect(sweep.variants.map(\.name) == variants.map(\.name))
    let report = try json(Array(try Data(contentsOf: URL(fileURLWithPath: out + "/report.json"))))
    let listed = try #require(report["variants"] as? [[String: Any]])
    #expect(listed.map { $0["name"] as? String } == variants.map(\.name))
    var reports: [[String: Any]] = []
    for (k, variant) in variants.enumerated() {
      let alone = makeTemporaryDirectory() + "/alone"
      _ = try WhatIf.run(options(.sql(variant.sql), alone))
      let separate = try json(
        Array(try Data(contentsOf: URL(fileURLWithPath: alone + "/report.json"))))
      let inSweep = try #require(listed[k]["report"] as? [String: Any])
      #expect(
        NSDictionary(dictionary: inSweep) == NSDictionary(dictionary: separate), "\(variant.name)")
      #expect(
        try changes(out + "/changes-\(variant.name).ndjson.lz4")
          == changes(alone + "/changes.ndjson.lz4"), "\(variant.name) changes")
      reports.append(inSweep)
    }
    return reports
  }

  @Test(
    "each variant's totals equal a separate whatif of it, on generated data", arguments: [1, 2])
  func equalsSeparateRuns(threads: Int) throws {
    let data = try generatedDataset
    let variants = [
      ("big-groups", scenarios[0].sql), ("quiet", scenarios[1].sql),
      ("throttle", readText(datasetURL("scenarios/throttle-3-per-10-minutes.sql").path)),
      ("nothing", "SELECT 1"),
      // The slots' settings built again over A's members.
      ("unmuted", "UPDATE channel_prefs SET chat_level = 'mentions' WHERE chat_level = 'none'"),
    ].map { WhatIfOptions.Variant(name: $0.0, sql: $0.1) }
    let out = makeTemporaryDirectory() + "/sweep"
    let reports = try Self.sweepEqualsSeparateRuns(
      variants, over: data, threads: threads, budget: 3, out: out)
    // The variants really differ, and the one that changes nothing is B = A.
    let delivered = reports.map { ($0["b"] as? [String: Any])?["delivered"] as? Int }
    #expect(Set(delivered.compactMap { $0 }).count >= 4)
    #expect(reports[3]["changed_pairs"] as? Int == 0)
    #expect(reports[4]["changed_pairs"] as? Int ?? 0 > 0)
    let page = readText(out + "/report.html")
    #expect(page.contains("<h1>"))
    for variant in variants { #expect(page.contains(#"id="\#(variant.name)""#)) }
  }
}

extension SweepTests {
  /// Throttle variants over an A without one are judged in one walk over
  /// one ledger (`ThrottleGroup`): each must still find what a `whatif` of
  /// it alone finds. On deferring users (pairs delivered later, throttled
  /// at their ts), on generated data, and over an A with a throttle of its
  /// own, with windows from an hour to a day and limits 1 and 2; one
  /// variant set twice, and one that also turns contract v3's groups on.
  @Test("throttles judged together equal each judged alone", arguments: [1, 2])
  func throttlesTogether(threads: Int) throws {
    func throttle(_ messages: Int, _ window: Int) -> String {
      """
      INSERT OR REPLACE INTO settings VALUES ('throttle_messages', '\(messages)'),
        ('throttle_window_ms', '\(window)')
      """
    }
    let variants = [
      ("one-a-day", throttle(1, 86_400_000)), ("two-a-day", throttle(2, 86_400_000)),
      ("one-in-6-hours", throttle(1, 21_600_000)), ("one-an-hour", throttle(1, 3_600_000)),
      ("two-a-day-again", throttle(2, 86_400_000)),
      ("two-a-day-grouped", throttle(2, 86_400_000) + ", ('notification_groups', 'on')"),
    ].map { WhatIfOptions.Variant(name: $0.0, sql: $0.1) }
    // And over an A with a throttle of its own (generated v2 data).
    var v2 = GeneratorOptions(
      users: 1_500, messages: 1_500, seed: 15, profile: .chat,
      out: makeTemporaryDirectory("fanout-sweep-v2"))
    v2.v2 = true
    let generated = try Generator.run(v2)
    let throttledA = (snapshot: generated.snapshotPath, traffic: generated.trafficPath)
    for data in [try deferringBase.get(), try generatedDataset, throttledA] {
      let reports = try Self.sweepEqualsSeparateRuns(variants, over: data, threads: threads)
      let throttled = reports.map {
        (($0["b"] as? [String: Any])?["suppressed"] as? [String: Int])?["throttled"] ?? 0
      }
      // The throttles differ, and each takes some pairs.
      #expect(Set(throttled).count >= 4 && !throttled.contains(0), "\(throttled)")
    }
  }
}

extension SweepTests {
  @Test("a sweep's command line: 2 to 16 variants, distinct file-safe names, nothing else")
  func commandLine() throws {
    let dir = makeTemporaryDirectory()
    let sql = dir + "/v.sql"
    try "UPDATE users SET chat_level = 'none'".write(toFile: sql, atomically: true, encoding: .utf8)
    let snapshot = SQLiteFixture.make(readText(datasetURL("sample/snapshot.sql").path))
    let traffic = datasetURL("sample/traffic.ndjson").path
    func run(_ extra: [String]) -> ProcessResult {
      runProcess(
        fanoutExecutable,
        ["whatif", "--snapshot", snapshot, "--messages", traffic, "--out", dir + "/out"] + extra)
    }
    for (extra, words) in [
      (["--variant", "one=\(sql)"], "2 to 16"),
      (["--variant", "a=\(sql)", "--variant", "a=\(sql)"], "given twice"),
      (["--variant", "a=\(sql)", "--variant", "b=\(sql)", "--sql", "SELECT 1"], "without"),
      (["--variant", "a/b=\(sql)", "--variant", "b=\(sql)"], "letters, digits"),
      (["--variant", "a", "--variant", "b=\(sql)"], "NAME=FILE.sql"),
      (["--variant", "a=\(dir)/none.sql", "--variant", "b=\(sql)"], "cannot read"),
    ] {
      let result = run(extra)
      #expect(result.status == 64, "\(extra): \(result.stderr)")
      #expect(result.stderr.contains(words), "\(extra): \(result.stderr)")
      #expect(!FileManager.default.fileExists(atPath: dir + "/out/report.json"))
    }
    let ok = run(["--variant", "none=\(sql)", "--variant", "same=\(sql)"])
    #expect(ok.status == 0, "\(ok.stderr)")
    #expect(ok.text.contains("2 variants against A"), "\(ok.text)")
    #expect(
      listDirectory(dir + "/out") == [
        "changes-none.ndjson.lz4", "changes-same.ndjson.lz4", "rejected.ndjson", "report.html",
        "report.json",
      ])
  }
}

extension SweepTests {
  /// A B whose pairs fall in A's slices is tallied as its difference from
  /// A, and one of other quiet hours decides only the pairs they change;
  /// evaluated and tallied whole instead, every report figure is the same.
  @Test("B sharing A's work reports what B evaluated and tallied whole does")
  func sharedWorkEqualsWhole() throws {
    let data = try generatedDataset
    try expectSharedEqualsWhole(
      data,
      scenarios + [
        ("other time zones", "UPDATE users SET timezone = 'Asia/Tokyo' WHERE rowid % 3 = 0")
      ])
    // Users who defer, presence that delays (v2 data without its throttle).
    try expectSharedEqualsWhole(
      try quietHoursBase.get(), quietHoursScenarios + throttleOverAScenarios)
    try expectSharedEqualsWhole(try deferringBase.get(), throttleOverAScenarios)
  }

  private func expectSharedEqualsWhole(
    _ data: (snapshot: String, traffic: String), _ scenarios: [(name: String, sql: String)]
  ) throws {
    let variants = scenarios.enumerated().map {
      WhatIfOptions.Variant(name: "v\($0.offset)", sql: $0.element.sql)
    }
    var reports: [[UInt8]] = []
    for shared in [true, false] {
      let out = makeTemporaryDirectory() + "/sweep"
      var options = WhatIfOptions(
        snapshot: data.snapshot, scenario: .sql(""), messages: data.traffic, out: out, threads: 2)
      options.sharesWorkWithA = shared
      _ = try WhatIf.sweep(options, variants: variants)
      reports.append(Array(try Data(contentsOf: URL(fileURLWithPath: out + "/report.json"))))
    }
    let firstDifference = zip(reports[0], reports[1]).enumerated().first {
      $0.element.0 != $0.element.1
    }
    let same = reports[0] == reports[1]
    #expect(
      same,
      "report.json differs from byte \(firstDifference?.offset ?? min(reports[0].count, reports[1].count))"
    )
    // The variants move the slices the relative tally counts.
    let listed = try #require(try Self.json(reports[0])["variants"] as? [[String: Any]])
    let changed = listed.filter {
      (($0["report"] as? [String: Any])?["changed_pairs"] as? Int ?? 0) > 0
    }
    #expect(changed.count >= variants.count - 1)
  }
}

@Suite("pushes per user per day")
struct PushesPerDayTests {
  @Test("ranked by counting as sorting ranks them, past the histogram too", arguments: [1, 2, 3])
  func rankedAsSorted(seed: UInt64) {
    var random = SeededRandom(seed: seed)
    let tenths = (0..<20_000).map { _ in
      random.next() % 10 == 0
        ? Int(random.next() % 100_000) : Int(random.next() % 50)
    }
    let ranked = WhatIfReport.PushesPerDay(tenths: tenths, budget: 3)
    let sorted = tenths.sorted()
    func rank(_ p: Int) -> Int { sorted[max(0, (p * sorted.count + 99) / 100 - 1)] }
    #expect(ranked.users == tenths.count)
    let expected: [Int] = [rank(50), rank(90), rank(99)]
    #expect([ranked.p50Tenths, ranked.p90Tenths, ranked.p99Tenths] == expected)
    #expect(ranked.p99Tenths >= WhatIfReport.PushesPerDay.histogramSize)
    #expect(ranked.maxTenths == sorted.last)
    #expect(ranked.overBudget == sorted.filter { $0 > 30 }.count)
    #expect(WhatIfReport.PushesPerDay(tenths: [], budget: 3).p50Tenths == 0)
  }
}

extension SweepTests {
  /// Variants that change only users' quiet hours are decided again in one
  /// walk over A's pairs (`QuietHoursChanges`): each must still find what a
  /// `whatif` of it alone finds — daily and weekly windows, quiet actions,
  /// one variant set twice, beside a variant evaluated otherwise — over
  /// users who defer and over users who drop.
  @Test("quiet hours judged together equal each judged alone", arguments: [1, 2])
  func quietHoursTogether(threads: Int) throws {
    let variants = [
      ("q21", "UPDATE users SET dnd_start = 21 * 60, dnd_end = 7 * 60"),
      (
        "q23-half-drop",
        "UPDATE users SET dnd_start = 23 * 60, dnd_end = 9 * 60, quiet_action = 'drop' WHERE rowid % 2 = 0"
      ),
      (
        "saturdays",
        "INSERT INTO dnd_weekly (user_id, weekday, start_min, end_min) SELECT user_id, 6, 0, 1439 FROM users WHERE rowid % 3 = 0"
      ),
      (
        "quiet-actions",
        "UPDATE users SET quiet_action = CASE WHEN rowid % 4 = 1 THEN 'defer' ELSE 'drop' END WHERE rowid % 2 = 1"
      ),
      ("q21-again", "UPDATE users SET dnd_start = 21 * 60, dnd_end = 7 * 60"),
      (
        "throttle",
        "INSERT INTO settings VALUES ('throttle_messages', '1'), ('throttle_window_ms', '86400000')"
      ),
    ].map { WhatIfOptions.Variant(name: $0.0, sql: $0.1) }
    for data in [try quietHoursBase.get(), try deferringBase.get()] {
      let reports = try Self.sweepEqualsSeparateRuns(variants, over: data, threads: threads)
      for (variant, report) in zip(variants, reports) {
        // Each changes some pairs.
        #expect((report["changed_pairs"] as? Int ?? 0) > 0, "\(variant.name)")
      }
    }
  }
}
