import FanoutGenerator
import FanoutPipeline
import FanoutSnapshot
import FanoutTestSupport
import FanoutWhatIf
import Foundation
import Testing

/// One pair's decision as `fanout eval --decisions` writes it: a trigger or a reason.
private struct Decision: Equatable {
  var message: String
  var user: String
  var outcome: String
  /// A deferred or delayed pair's delivery time.
  var deliverAt: Int64? = nil
}

/// What two separate `fanout eval` runs say about A and B.
private struct EvalRun {
  var summary: [String: Any]
  var decisions: [Decision]
  /// Contract v3: the delivered pairs' badges.
  var badges: [Int] = []

  init(snapshot: String, messages: String) throws {
    let out = makeTemporaryDirectory() + "/eval"
    _ = try Pipeline.eval(
      EvalOptions(snapshot: snapshot, messages: messages, out: out, decisions: true, threads: 2))
    summary = try jsonObject(out + "/summary.json")
    let bytes = try #require(
      decodeLZ4Frames(
        Array(try Data(contentsOf: URL(fileURLWithPath: out + "/decisions.ndjson.lz4")))))
    badges = try ndjson(bytes).compactMap { $0["badge"] as? Int }
    decisions = try ndjson(bytes).map {
      Decision(
        message: $0["message"] as! String, user: $0["user"] as! String,
        outcome: ($0["trigger"] ?? $0["reason"]) as! String,
        deliverAt: ($0["deliver_at"] as? NSNumber)?.int64Value)
    }
  }
}

private func jsonObject(_ path: String) throws -> [String: Any] {
  try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: path)))
    as! [String: Any]
}

private func ndjson(_ bytes: [UInt8]) throws -> [[String: Any]] {
  try bytes.split(separator: UInt8(ascii: "\n")).map {
    try JSONSerialization.jsonObject(with: Data($0)) as! [String: Any]
  }
}

/// The 20 ids (users or channels) whose delivered count changes most
/// from `delivered[0]` (A's) to `delivered[1]` (B's), by size of the
/// change, then in byte order; unchanged ids are never listed.
private func topChanges(_ delivered: [[String: Int]]) -> [(id: String, a: Int, b: Int)] {
  var changed: [(id: String, a: Int, b: Int)] = []
  for id in Set(delivered[0].keys).union(delivered[1].keys) {
    let (x, y) = (delivered[0][id] ?? 0, delivered[1][id] ?? 0)
    if x != y { changed.append((id, x, y)) }
  }
  changed.sort { p, q in
    let (dp, dq) = (abs(p.b - p.a), abs(q.b - q.a))
    return dp != dq ? dp > dq : byteOrder(p.id, q.id)
  }
  return Array(changed.prefix(20))
}

/// Each message id's channel id, from the traffic's lines.
private func messageChannels(_ messages: String) throws -> [String: String] {
  try Data(contentsOf: URL(fileURLWithPath: messages)).split(separator: UInt8(ascii: "\n"))
    .reduce(into: [:]) { channels, line in
      guard let object = try? JSONSerialization.jsonObject(with: Data(line)) as? [String: Any],
        let id = object["id"] as? String, let channel = object["channel"] as? String
      else { return }
      channels[id] = channel
    }
}

private func byteOrder(_ x: String, _ y: String) -> Bool {
  Array(x.utf8).lexicographicallyPrecedes(Array(y.utf8))
}

/// Runs `fanout whatif` (the library entry point) and checks every count of
/// report.json and every line of changes against two `fanout eval` runs.
/// Message ids must be unique in `messages` (they key the pairs here).
private func checkAgainstEval(
  snapshot a: String, b: String, scenario: WhatIfOptions.Scenario, messages: String,
  indexCache: IndexCache? = nil
) throws {
  let out = makeTemporaryDirectory() + "/whatif"
  var options = WhatIfOptions(
    snapshot: a, scenario: scenario, messages: messages, out: out, threads: 2)
  options.indexCache = indexCache
  let result = try WhatIf.run(options)
  let report = try jsonObject(out + "/report.json")
  let evals = [
    try EvalRun(snapshot: a, messages: messages), try EvalRun(snapshot: b, messages: messages),
  ]

  // Totals per side equal summary.json's.
  for (s, key) in ["a", "b"].enumerated() {
    let side = report[key] as! [String: Any]
    let summary = evals[s].summary
    #expect(side["pairs"] as! Int == summary["pairs"] as! Int, "\(key) pairs")
    #expect(side["delivered"] as! Int == summary["delivered"] as! Int, "\(key) delivered")
    #expect(side["deferred"] as! Int == summary["deferred"] as! Int, "\(key) deferred")
    #expect(
      side["deliveries"] as! NSDictionary == summary["deliveries"] as! NSDictionary,
      "\(key) deliveries")
    #expect(
      side["suppressed"] as! NSDictionary == summary["suppressed"] as! NSDictionary,
      "\(key) suppressed")
    // Contract v3: the notification counts, and the badges at delivery.
    let notifications = side["notifications"] as? [String: Any]
    #expect((notifications == nil) == (summary["notifications"] == nil), "\(key) notifications")
    if let notifications, let counts = summary["notifications"] as? [String: Int] {
      for name in ["hidden", "removed", "cancelled", "unread"] {
        #expect(notifications[name] as? Int == counts[name], "\(key) \(name)")
      }
      let histogram = notifications["badges"] as! [String: Int]
      let bounds = [1, 2, 3, 4, 6, 11, 21, 51, 101]
      let labels = ["1", "2", "3", "4-5", "6-10", "11-20", "21-50", "51-100", "101+"]
      for (k, label) in labels.enumerated() {
        let upper = k + 1 < bounds.count ? bounds[k + 1] : Int.max
        let expected = evals[s].badges.filter { $0 >= bounds[k] && $0 < upper }.count
        #expect(histogram[label] == expected, "\(key) badges \(label)")
      }
    }
    #expect(report["messages"] as! Int == summary["messages"] as! Int)
    #expect(report["rejected"] as! Int == summary["rejected"] as! Int)
  }

  // Pair by pair: merge A's and B's decisions per message, users in byte order.
  var messageOrder: [String] = []
  var pairs: [[String: [Decision]]] = [[:], [:]]
  for s in 0..<2 {
    for d in evals[s].decisions {
      if pairs[0][d.message] == nil && pairs[1][d.message] == nil { messageOrder.append(d.message) }
      pairs[s][d.message, default: []].append(d)
    }
  }
  // Messages in input order: eval writes them so on both sides.
  let inputOrder = try ndjsonLineIDs(messages)
  messageOrder.sort { inputOrder[$0]! < inputOrder[$1]! }

  let outcomes = report["outcomes"] as! [String]
  var matrix = [[Int]](repeating: [Int](repeating: 0, count: outcomes.count), count: outcomes.count)
  var expectedChanges: [[String]] = []
  var delivered: [[String: Int]] = [[:], [:]]
  for message in messageOrder {
    var byUser: [String: [String]] = [:]
    for s in 0..<2 {
      for d in pairs[s][message] ?? [] {
        byUser[d.user, default: ["not_member", "not_member"]][s] = d.outcome
        if ["message", "mention", "call", "pinned"].contains(d.outcome) {
          delivered[s][d.user, default: 0] += 1
        }
      }
    }
    for user in byUser.keys.sorted(by: byteOrder) {
      let (x, y) = (byUser[user]![0], byUser[user]![1])
      matrix[outcomes.firstIndex(of: x)!][outcomes.firstIndex(of: y)!] += 1
      if x != y { expectedChanges.append([message, user, x, y]) }
    }
  }
  #expect(report["transitions"] as! [[Int]] == matrix)
  #expect(report["changed_pairs"] as! Int == expectedChanges.count)
  #expect(result.changedPairs == expectedChanges.count)
  let changes = try ndjson(
    try #require(
      decodeLZ4Frames(
        Array(try Data(contentsOf: URL(fileURLWithPath: out + "/changes.ndjson.lz4"))))))
  #expect(
    changes.map { [$0["message"], $0["user"], $0["a"], $0["b"]] as! [String] } == expectedChanges)

  // Every breakdown adds up to the totals.
  let times = messageTimes(messages)
  var utc = Calendar(identifier: .gregorian)
  utc.timeZone = TimeZone(identifier: "UTC")!
  for (s, key) in ["a", "b"].enumerated() {
    let side = report[key] as! [String: Any]
    let total = (side["delivered"] as! Int, (side["pairs"] as! Int) - (side["delivered"] as! Int))
    for breakdown in ["by_channel_kind", "by_channel_size", "by_hour_utc", "by_hour_local"] {
      let rows = (report[breakdown] as! [[String: Any]]).map { $0[key] as! [String: Int] }
      #expect(rows.reduce(0) { $0 + $1["delivered"]! } == total.0, "\(breakdown) \(key)")
      #expect(rows.reduce(0) { $0 + $1["suppressed"]! } == total.1, "\(breakdown) \(key)")
    }
    // Each pair in its recipient's local hour at the message's ts (the
    // side's own time zones, read with Foundation's).
    let hourOf = try localHours(snapshot: [a, b][s], messages: messages)
    var expectedLocal = [[Int]](repeating: [0, 0], count: 24)
    for d in evals[s].decisions {
      let isDelivered = ["message", "mention", "call", "pinned"].contains(d.outcome)
      expectedLocal[hourOf(d.message, d.user)][isDelivered ? 0 : 1] += 1
    }
    let local = (report["by_hour_local"] as! [[String: Any]]).map { $0[key] as! [String: Int] }
    #expect(local.map { [$0["delivered"]!, $0["suppressed"]!] } == expectedLocal, "local \(key)")
    // Each delivered pair in the UTC hour it is delivered at, each other
    // pair in its message's.
    var expectedDelivery = [[Int]](repeating: [0, 0], count: 24)
    for d in evals[s].decisions {
      let isDelivered = ["message", "mention", "call", "pinned"].contains(d.outcome)
      let at =
        isDelivered ? d.deliverAt.map { Date(timeIntervalSince1970: Double($0) / 1000) } : nil
      let hour = utc.component(.hour, from: at ?? times[d.message]!)
      expectedDelivery[hour][isDelivered ? 0 : 1] += 1
    }
    let delivery = (report["by_delivery_hour_utc"] as! [[String: Any]]).map {
      $0[key] as! [String: Int]
    }
    #expect(
      delivery.map { [$0["delivered"]!, $0["suppressed"]!] } == expectedDelivery,
      "delivery hour \(key)")
    let gateways = report["by_gateway"] as! [[String: Any]]
    let deliveries = evals[s].summary["deliveries"] as! [String: Int]
    for row in gateways {
      let n = (row[key] as! [String: Int])["delivered"]!
      #expect(n == deliveries[row["gateway"] as! String] ?? 0, "by_gateway \(key)")
    }
  }

  // The users whose delivered count changes most.
  let expectedTop: [[String]] = topChanges(delivered).map { [$0.id, String($0.a), String($0.b)] }
  let reported: [[String]] = (report["top_users"] as! [[String: Any]]).map { row in
    [row["user"] as! String, String(row["a"] as! Int), String(row["b"] as! Int)]
  }
  #expect(reported == expectedTop)
  // Each top user's example is its first changed pair, with the message's id.
  var firstChange: [String: String] = [:]
  for change in expectedChanges where firstChange[change[1]] == nil {
    firstChange[change[1]] = change[0]
  }
  for row in report["top_users"] as! [[String: Any]] {
    let example = try #require(row["example"] as? [String: Any], "\(row)")
    #expect(example["user"] as? String == row["user"] as? String)
    #expect(example["message"] as? String == firstChange[row["user"] as! String], "\(row)")
  }
  // The channels whose delivered count changes most, each with its first
  // changed pair (channels counted apart from their rows' order).
  let channelOf = try messageChannels(messages)
  var channelDelivered: [[String: Int]] = [[:], [:]]
  for s in 0..<2 {
    for d in evals[s].decisions where ["message", "mention", "call", "pinned"].contains(d.outcome) {
      channelDelivered[s][channelOf[d.message]!, default: 0] += 1
    }
  }
  var channelFirstChange: [String: [String]] = [:]
  for change in expectedChanges where channelFirstChange[channelOf[change[0]]!] == nil {
    channelFirstChange[channelOf[change[0]]!] = [change[0], change[1]]
  }
  #expect(
    (report["top_channels"] as! [[String: Any]]).map { row -> [String] in
      let example = row["example"] as? [String: Any]
      return [
        row["channel"] as! String, String(row["a"] as! Int), String(row["b"] as! Int),
        example?["message"] as? String ?? "", example?["user"] as? String ?? "",
      ]
    }
      == topChanges(channelDelivered).map {
        [$0.id, String($0.a), String($0.b)] + channelFirstChange[$0.id]!
      })

  // Users affected: those with a changed pair.
  #expect(report["users_affected"] as? Int == Set(expectedChanges.map { $0[1] }).count)
  // Pushes per user per day, among users delivered to on either side.
  let days = try #require(report["days"] as? Int)
  let stamps = try String(contentsOfFile: messages, encoding: .utf8).split(separator: "\n")
    .compactMap { line -> Int64? in
      guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
        let id = object["id"] as? String, pairs[0][id] != nil || pairs[1][id] != nil
      else { return nil }
      return (object["ts"] as? NSNumber)?.int64Value
    }
  if stamps.count == messageOrder.count, let first = stamps.min(), let last = stamps.max() {
    #expect(days == Int(max(1, (last - first + 86_400_000) / 86_400_000)))
  }
  let budget = try #require(report["budget"] as? Int)
  let receivers = Set(delivered[0].keys).union(delivered[1].keys)
  let perDay = try #require(report["pushes_per_user_per_day"] as? [String: [String: Any]])
  for (s, key) in ["a", "b"].enumerated() {
    let tenths = receivers.map { (delivered[s][$0] ?? 0) * 10 / days }.sorted()
    let reportedSide = try #require(perDay[key])
    func rank(_ p: Int) -> Double { Double(tenths[max(0, (p * tenths.count + 99) / 100 - 1)]) / 10 }
    #expect(reportedSide["users"] as? Int == receivers.count, "\(key) users")
    if !tenths.isEmpty {
      #expect((reportedSide["p50"] as? NSNumber)?.doubleValue == rank(50), "\(key) p50")
      #expect((reportedSide["p90"] as? NSNumber)?.doubleValue == rank(90), "\(key) p90")
      #expect((reportedSide["max"] as? NSNumber)?.doubleValue == Double(tenths.last!) / 10)
    }
    #expect(
      reportedSide["over_budget"] as? Int == tenths.filter { $0 > budget * 10 }.count,
      "\(key) over budget")
  }
}

/// Message id → line number, for the lines of a traffic file that have an id.
/// The local hour (0–23) of message id → user id: the message's ts in the
/// user's `timezone` in `snapshot` (NULL: UTC).
private func localHours(snapshot: String, messages: String) throws -> (String, String) -> Int {
  let rows = SQLiteSession(snapshot).value(
    "SELECT group_concat(user_id || char(9) || coalesce(timezone, 'UTC'), char(10)) FROM users")
  var zones: [String: TimeZone] = [:]
  for row in (rows ?? "").split(separator: "\n") {
    let fields = row.split(separator: "\t", omittingEmptySubsequences: false)
    zones[String(fields[0])] = try #require(TimeZone(identifier: String(fields[1])))
  }
  let times = messageTimes(messages)
  var calendar = Calendar(identifier: .gregorian)
  return { message, user in
    calendar.timeZone = zones[user]!
    return calendar.component(.hour, from: times[message]!)
  }
}

/// Each message's ts, by id, from the traffic file `messages`.
private func messageTimes(_ messages: String) -> [String: Date] {
  let dates = [ISO8601DateFormatter(), ISO8601DateFormatter()]
  dates[1].formatOptions.insert(.withFractionalSeconds)
  var times: [String: Date] = [:]
  for line in readText(messages).split(separator: "\n") {
    guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
      let id = object["id"] as? String
    else { continue }
    if let ms = (object["ts"] as? NSNumber)?.int64Value {
      times[id] = Date(timeIntervalSince1970: Double(ms) / 1000)
    } else if let text = object["ts"] as? String {
      times[id] = dates[0].date(from: text) ?? dates[1].date(from: text)
    }
  }
  return times
}

private func ndjsonLineIDs(_ path: String) throws -> [String: Int] {
  var ids: [String: Int] = [:]
  for (n, line) in readText(path).split(separator: "\n").enumerated() {
    if let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
      let id = object["id"] as? String, ids[id] == nil
    {
      ids[id] = n
    }
  }
  return ids
}

private let sampleSnapshot = SQLiteFixture.make(readText(datasetURL("sample/snapshot.sql").path))
private let sampleTraffic = datasetURL("sample/traffic.ndjson").path

/// The what-if scenarios the tests replay, as SQL on A: the README's, from
/// `datasets/scenarios/`, and a few that touch the other tables.
let scenarios: [(name: String, sql: String)] =
  [
    "big-groups-mentions-only", "quiet-hours-22-08", "newsletter-opt-out", "defer-quiet-hours",
    "large-channels-mentions-only",
  ].map {
    ($0, readText(datasetURL("scenarios/\($0).sql").path))
  } + [
    (
      "default chat level mentions",
      "INSERT OR REPLACE INTO settings VALUES ('default_chat_level', 'mentions')"
    ),
    (
      // Rules 0–7 as A's: B takes A's evaluation before its ledgers.
      "throttle 1 an hour",
      """
      INSERT OR REPLACE INTO settings VALUES ('throttle_messages', '1'),
        ('throttle_window_ms', '3600000')
      """
    ),
    (
      // Rule 8 over deferred pairs, and pairs presence delays.
      "throttle 1 an hour, quiet hours deferred, presence delays",
      """
      INSERT OR REPLACE INTO settings VALUES ('default_quiet_action', 'defer'),
        ('throttle_messages', '1'), ('throttle_window_ms', '3600000'),
        ('presence_action', 'delay'), ('presence_delay_ms', '120000')
      """
    ),
    (
      "weekly DND, restricted email, fewer devices",
      """
      INSERT INTO dnd_weekly SELECT user_id, 7, 0, 1439 FROM users WHERE user_id < 'm';
      INSERT OR REPLACE INTO gateway_prefs SELECT user_id, 'email', 1 FROM users;
      DELETE FROM devices WHERE device_id % 3 = 0
      """
    ),
    (
      "members removed and added",
      """
      DELETE FROM members WHERE rowid % 4 = 1;
      INSERT OR IGNORE INTO members SELECT c.channel_id, u.user_id FROM channels c, users u WHERE u.rowid % 5 = 0 AND c.rowid % 40 = 0
      """
    ),
    (
      // B as A's index with the channels' kinds, its slots built again;
      // its pairs fall in other slices than A's.
      "groups and broadcasts swapped, broadcasts mentions-only",
      """
      UPDATE channels SET kind =
        CASE kind WHEN 'group' THEN 'broadcast' WHEN 'broadcast' THEN 'group' ELSE kind END;
      INSERT OR REPLACE INTO settings VALUES ('default_chat_level.broadcast', 'mentions')
      """
    ),
    (
      // B as A's index with the categories' columns and the gateways
      // numbered again.
      "categories' defaults turned, mandatory gateways turned",
      """
      UPDATE categories SET default_preference =
        CASE default_preference WHEN 'opt_in' THEN 'opt_out' ELSE 'opt_in' END;
      UPDATE category_gateways SET mandatory = 1 - mandatory
      """
    ),
  ]

@Suite("fanout whatif agrees with two fanout eval runs")
struct WhatIfAgreesWithEvalTests {
  @Test("on the sample", arguments: scenarios)
  func sample(_ scenario: (name: String, sql: String)) throws {
    #expect(!scenario.sql.isEmpty)
    let b = SQLiteFixture.copy(sampleSnapshot, applying: scenario.sql)
    try checkAgainstEval(
      snapshot: sampleSnapshot, b: b, scenario: .sql(scenario.sql), messages: sampleTraffic)
  }

  @Test("on generated data, with --sql and with --against", arguments: scenarios)
  func generated(_ scenario: (name: String, sql: String)) throws {
    let data = try generatedDataset
    let b = SQLiteFixture.copy(data.snapshot, applying: scenario.sql)
    try checkAgainstEval(
      snapshot: data.snapshot, b: b, scenario: .sql(scenario.sql), messages: data.traffic)
    try checkAgainstEval(
      snapshot: data.snapshot, b: b, scenario: .snapshot(b), messages: data.traffic)
  }
}

/// Scenarios that change only users' quiet hours (B decides again only
/// the pairs where they differ: `Evaluator.redecideQuietHours`), over
/// generated v2 data without its throttle: users who defer, presence
/// that delays, snoozes, calls and forced messages.
let quietHoursScenarios: [(name: String, sql: String)] = [
  (
    "quiet hours moved, added and removed",
    """
    UPDATE users SET dnd_start = 21 * 60, dnd_end = 7 * 60 WHERE rowid % 3 = 0;
    UPDATE users SET dnd_start = NULL, dnd_end = NULL WHERE rowid % 3 = 1;
    UPDATE users SET dnd_start = 12 * 60, dnd_end = 14 * 60 WHERE dnd_start IS NULL AND rowid % 3 = 2
    """
  ),
  (
    "quiet actions turned, quiet hours for deferring users",
    """
    UPDATE users SET quiet_action = CASE quiet_action WHEN 'defer' THEN 'drop' ELSE 'defer' END
      WHERE rowid % 4 = 0;
    UPDATE users SET dnd_start = 22 * 60, dnd_end = 8 * 60 WHERE quiet_action = 'defer'
    """
  ),
  (
    // (Decides again only the pairs A dropped in quiet time:
    // `Evaluator.redecideQuietPairs`.)
    "the default quiet action turned to defer",
    "INSERT OR REPLACE INTO settings VALUES ('default_quiet_action', 'defer')"
  ),
  (
    "weekly quiet hours",
    """
    INSERT INTO dnd_weekly SELECT user_id, 1 + rowid % 7, 9 * 60, 17 * 60 FROM users WHERE rowid % 2 = 0
    """
  ),
]

@Suite("fanout whatif agrees with two fanout eval runs: quiet hours decided again")
struct WhatIfQuietHoursAgreesWithEvalTests {
  @Test("on generated v2 data without a throttle", arguments: quietHoursScenarios)
  func generatedV2(_ scenario: (name: String, sql: String)) throws {
    let a = try quietHoursBase.get()
    let b = SQLiteFixture.copy(a.snapshot, applying: scenario.sql)
    try checkAgainstEval(
      snapshot: a.snapshot, b: b, scenario: .sql(scenario.sql), messages: a.traffic)
  }
}

/// Scenarios that set only a throttle over an A without one (B lists only
/// the pairs its throttle takes from A's: `Evaluator.listThrottled`), over
/// generated v2 data without its throttle, whose users who defer and
/// presence that delays make deferred pairs to throttle.
let throttleOverAScenarios: [(name: String, sql: String)] = [
  (
    "a throttle of 1 an hour",
    """
    INSERT OR REPLACE INTO settings VALUES ('throttle_messages', '1'),
      ('throttle_window_ms', '3600000')
    """
  ),
  (
    // (A day's window throttles deferred pairs too: they count at their ts.)
    "a throttle of 2 a day",
    """
    INSERT OR REPLACE INTO settings VALUES ('throttle_messages', '2'),
      ('throttle_window_ms', '86400000')
    """
  ),
]

@Suite("fanout whatif agrees with two fanout eval runs: a throttle over A's pass")
struct WhatIfThrottleOverAAgreesWithEvalTests {
  @Test("on generated v2 data without a throttle", arguments: throttleOverAScenarios)
  func generatedV2(_ scenario: (name: String, sql: String)) throws {
    for a in [try quietHoursBase.get(), try deferringBase.get()] {
      let b = SQLiteFixture.copy(a.snapshot, applying: scenario.sql)
      try checkAgainstEval(
        snapshot: a.snapshot, b: b, scenario: .sql(scenario.sql), messages: a.traffic)
    }
  }
}

/// `quietHoursBase` where every user has quiet hours from 20:00 to 09:00
/// and defers, so that many pairs are deferred to hours of their own.
let deferringBase = Result { () throws -> (snapshot: String, traffic: String) in
  let base = try quietHoursBase.get()
  let snapshot = SQLiteFixture.copy(
    base.snapshot,
    applying: """
      UPDATE users SET dnd_start = 20 * 60, dnd_end = 9 * 60, quiet_action = 'defer';
      DELETE FROM dnd_weekly
      """)
  return (snapshot, base.traffic)
}

/// Generated v2 data (users who defer, presence delays) without its
/// throttle, so that a B of other quiet hours decides only their pairs.
let quietHoursBase = Result { () throws -> (snapshot: String, traffic: String) in
  var options = GeneratorOptions(
    users: 1_500, messages: 1_500, seed: 14, profile: .chat,
    out: makeTemporaryDirectory("fanout-whatif-quiet"))
  options.v2 = true
  let data = try Generator.run(options)
  let snapshot = SQLiteFixture.copy(
    data.snapshotPath, applying: "DELETE FROM settings WHERE key LIKE 'throttle%'")
  return (snapshot, data.trafficPath)
}

/// Contract v3 scenarios over generated v3 data (caps 4 and 3).
let v3Scenarios: [(name: String, sql: String)] = [
  (
    "one notification per group",
    "UPDATE settings SET value = '1' WHERE key = 'notification_group_size_max'"
  ),
  ("groups off", "DELETE FROM settings WHERE key LIKE 'notification_group%'"),
  (
    "presence delays ten minutes (more reads cancel)",
    "INSERT OR REPLACE INTO settings VALUES ('presence_delay_ms', '600000')"
  ),
  (
    // B as A's index with its presence windows, muted senders and thread
    // levels (the user records read the presence).
    "half the presence windows and mutes gone, every thread level 'all'",
    """
    DELETE FROM presence WHERE rowid % 2 = 0;
    DELETE FROM user_mutes WHERE rowid % 2 = 1;
    UPDATE thread_prefs SET chat_level = 'all'
    """
  ),
]

@Suite("fanout whatif agrees with two fanout eval runs: contract v3")
struct WhatIfV3AgreesWithEvalTests {
  @Test("on generated v3 data", arguments: v3Scenarios)
  func generatedV3(_ scenario: (name: String, sql: String)) throws {
    let dir = makeTemporaryDirectory("fanout-whatif-v3")
    var options = GeneratorOptions(
      users: 1_500, messages: 1_500, seed: 12, profile: .chat, out: dir)
    options.v3 = true
    let data = try Generator.run(options)
    let b = SQLiteFixture.copy(data.snapshotPath, applying: scenario.sql)
    try checkAgainstEval(
      snapshot: data.snapshotPath, b: b, scenario: .sql(scenario.sql), messages: data.trafficPath)
  }
}

@Suite("fanout whatif --sql of settings and users' times, A from the index cache")
struct WhatIfSettingsFromCacheTests {
  /// B is A's cached index with B's settings and users' zones, DND and
  /// quiet actions: the users' own quiet actions must survive the compiled
  /// index for B's default to apply.
  @Test(
    "agrees with two eval runs",
    arguments: v3Scenarios
      + scenarios.filter {
        ["defer-quiet-hours", "default chat level mentions", "quiet-hours-22-08"].contains($0.name)
      } + [
        (
          "time zones moved, quiet actions set",
          """
          UPDATE users SET timezone = 'Asia/Kolkata' WHERE rowid % 4 = 0;
          UPDATE users SET quiet_action = 'defer' WHERE rowid % 3 = 0
          """
        )
      ])
  func settingsFromCache(_ scenario: (name: String, sql: String)) throws {
    let data = try cachedV3Data.get()
    let b = SQLiteFixture.copy(data.snapshot, applying: scenario.sql)
    try checkAgainstEval(
      snapshot: data.snapshot, b: b, scenario: .sql(scenario.sql), messages: data.traffic,
      indexCache: data.cache)
  }
}

/// Generated v3 data whose snapshot is in an index cache, made once.
private let cachedV3Data = Result {
  () throws -> (snapshot: String, traffic: String, cache: IndexCache) in
  var options = GeneratorOptions(
    users: 1_500, messages: 1_500, seed: 13, profile: .chat,
    out: makeTemporaryDirectory("fanout-whatif-cached"))
  options.v3 = true
  let data = try Generator.run(options)
  Thread.sleep(forTimeInterval: 2.1)  // settled, so that the cache takes it (SnapshotFingerprint)
  let cache = IndexCache(directory: makeTemporaryDirectory("fanout-whatif-cache"))
  _ = try SnapshotLoader.load(path: data.snapshotPath, cache: cache)
  IndexCache.waitForWritesAside()
  let files = try FileManager.default.contentsOfDirectory(atPath: cache.directory)
  try #require(files.contains { $0.hasSuffix(".fanout-index") })
  return (data.snapshotPath, data.trafficPath, cache)
}

/// A small generated dataset, made once.
private let generatedData: Result<(snapshot: String, traffic: String), Error> = Result {
  let dir = makeTemporaryDirectory("fanout-whatif-gen")
  let report = try Generator.run(
    GeneratorOptions(users: 1_500, messages: 1_200, seed: 11, profile: .chat, out: dir))
  return (report.snapshotPath, report.trafficPath)
}
var generatedDataset: (snapshot: String, traffic: String) {
  get throws { try generatedData.get() }
}
