import FanoutTestSupport
import Foundation
import Testing

@testable import FanoutPipeline

/// Contract v3 (section 6) end to end through `fanout eval`'s pipeline,
/// against the reference evaluator's own plain section 6.
@Suite("Contract v3 against the reference evaluator")
struct V3DifferentialTests {
  /// The run's files, parsed: decision lines, update lines, recipient
  /// entries per gateway, summary.
  struct Run {
    var decisions: [[String: Any]]
    var updates: [[String: Any]]
    var recipients: [(message: String, entry: [String: Any])]
    var summary: [String: Any]
    var bytes: [String: [UInt8]]
  }

  static func run(
    _ world: RandomWorld, threads: Int, summaryOnly: Bool = false, decisions: Bool = true,
    ledgerChunks: Int? = nil
  ) throws -> Run {
    let folder = makeTemporaryDirectory("fanout-v3")
    let traffic = folder + "/traffic.ndjson"
    try (world.messages.joined(separator: "\n") + "\n").write(
      toFile: traffic, atomically: true, encoding: .utf8)
    var options = EvalOptions(
      snapshot: world.makeSnapshot(), messages: traffic, out: folder + "/out",
      decisions: decisions && !summaryOnly, summaryOnly: summaryOnly, threads: threads)
    options.indexCache = nil
    if let ledgerChunks { options.ledgerChunks = ledgerChunks }
    _ = try Pipeline.eval(options)
    func lines(_ name: String) -> [[String: Any]] {
      guard let data = FileManager.default.contents(atPath: folder + "/out/" + name) else {
        return []
      }
      let text = decodeLZ4Frames(Array(data)) ?? []
      return text.split(separator: UInt8(ascii: "\n")).map {
        try! JSONSerialization.jsonObject(with: Data($0)) as! [String: Any]
      }
    }
    var recipients: [(String, [String: Any])] = []
    var bytes: [String: [UInt8]] = [:]
    for name in listDirectory(folder + "/out") where name != "summary.json" {
      bytes[name] = Array(FileManager.default.contents(atPath: folder + "/out/" + name)!)
    }
    for gateway in ["apns", "fcm", "email", "webpush"] {
      for line in lines(gateway + ".ndjson.lz4") {
        for entry in line["recipients"] as! [[String: Any]] {
          recipients.append(("\(line["message"]!)", entry))
        }
      }
    }
    let summary =
      try JSONSerialization.jsonObject(
        with: FileManager.default.contents(atPath: folder + "/out/summary.json")!)
      as! [String: Any]
    return Run(
      decisions: lines("decisions.ndjson.lz4"), updates: lines("updates.ndjson.lz4"),
      recipients: recipients, summary: summary, bytes: bytes)
  }

  static func fields(_ object: [String: Any]) -> String? {
    guard let group = object["group"] else { return nil }
    let hide = (object["hide"] as? [Int]) ?? []
    return "\(group),\(object["notification"]!),\(object["badge"]!),\(hide)"
  }

  @Test(
    "random v3 worlds: every pair's notification, every update line, the counts",
    arguments: differentialSeeds(UInt64(301)...318))
  func randomWorld(_ seed: UInt64) throws {
    try Self.expectAgreement(RandomWorld(seed: seed, v3: true), threads: 1 + Int(seed % 3), seed)
  }

  @Test(
    "random v3 worlds in time order, read a few notifications at a time: as the reference",
    arguments: differentialSeeds(Self.inTimeOrderSeeds))
  func inTimeOrder(_ seed: UInt64) throws {
    var world = RandomWorld(seed: seed, users: 12, messages: 500, v3: true)
    world.messages = Self.inTimeOrder(world.messages, members: world.members, seed: seed)
    // (The suite's own seeds must reach the removed prefixes; a wider
    // campaign's seeds may draw fewer reads.)
    if Self.inTimeOrderSeeds.contains(seed) {
      let removed = ReferenceEvaluator(world).notifications().counts.removed
      #expect(removed > 50, "seed \(seed): \(removed)")
    }
    try Self.expectAgreement(world, threads: 1 + Int(seed % 3), seed)
  }

  static let inTimeOrderSeeds = UInt64(341)...348

  /// `lines` sorted by ts, one in ten then swapped with the next (out of
  /// order), and after each message a read by a member of its channel up
  /// to a few messages back: groups in ts order whose backlog reads take
  /// a few at a time (the ledger's removed prefixes), filled again after.
  static func inTimeOrder(_ lines: [String], members: [String: [String]], seed: UInt64)
    -> [String]
  {
    var random = SeededRandom(seed: seed)
    func object(_ line: String) -> [String: Any] {
      try! JSONSerialization.jsonObject(with: Data(line.utf8)) as! [String: Any]
    }
    var sorted = lines.enumerated().map { (ts: object($1)["ts"] as! Int64, k: $0, line: $1) }
      .sorted { ($0.ts, $0.k) < ($1.ts, $1.k) }.map(\.line)
    for i in stride(from: 0, to: sorted.count - 1, by: 1)
    where Int.random(in: 0..<10, using: &random) == 0 {
      sorted.swapAt(i, i + 1)
    }
    var out: [String] = []
    var seen: [String: [Int64]] = [:]  // channel -> its messages' ts, in line order
    for (i, line) in sorted.enumerated() {
      out.append(line)
      let o = object(line)
      guard o["event"] == nil, let channel = o["channel"] as? String else { continue }
      seen[channel, default: []].append(o["ts"] as! Int64)
      let reader = members[channel]?.randomElement(using: &random) ?? "ghost"
      let times = seen[channel]!
      let back = Int.random(in: 2...6, using: &random)
      guard times.count > back else { continue }
      out.append(
        #"{"id":"x\#(i)","event":"read","channel":"\#(channel)","user":"\#(reader)","ts":\#(times[times.count - 1 - back])}"#
      )
    }
    return out
  }

  /// Runs `world` and checks every pair's notification fields, every
  /// update line and the counts against the reference evaluator.
  static func expectAgreement(_ world: RandomWorld, threads: Int, _ seed: UInt64) throws {
    let reference = ReferenceEvaluator(world)
    let expected = reference.notifications()
    let run = try Self.run(world, threads: threads)

    var actual: [String: String] = [:]
    for line in run.decisions {
      let key = "\(line["message"]!)/\(line["user"]!)"
      let delivered = line["deliver"] as! Bool
      #expect(delivered == (Self.fields(line) != nil), "seed \(seed) \(key)")
      if let f = Self.fields(line) { actual[key] = f }
    }
    let differing = expected.fields.keys.sorted().filter { actual[$0] != expected.fields[$0] }
    #expect(actual.count == expected.fields.count, "seed \(seed)")
    #expect(
      differing.count == 0,
      "seed \(seed): \(differing.prefix(4).map { "\($0): \(actual[$0] ?? "nil") vs \(expected.fields[$0]!)" })"
    )
    // Every device entry carries its pair's fields.
    for (message, entry) in run.recipients {
      #expect(
        Self.fields(entry) == expected.fields["\(message)/\(entry["user"]!)"], "seed \(seed)")
    }
    let updates = run.updates.map {
      "\($0["line"]!)|\($0["user"]!)|\($0["channel"]!)|\($0["removed"] as! [Int])|\($0["cancelled"] as! [Int])|\($0["badge"]!)"
    }
    #expect(updates == expected.updates, "seed \(seed)")
    let counts = run.summary["notifications"] as! [String: Int]
    #expect(counts["hidden"] == expected.counts.hidden, "seed \(seed)")
    #expect(counts["removed"] == expected.counts.removed, "seed \(seed)")
    #expect(counts["cancelled"] == expected.counts.cancelled, "seed \(seed)")
    #expect(counts["unread"] == expected.counts.unread, "seed \(seed)")
    let reads = world.messages.filter { $0.contains(#""event":"read""#) }.count
    #expect(run.summary["reads"] as? Int == reads)

    // Without decision lines, the delivery lines are written from the
    // pass before the ledgers: the same files, the same counts.
    let deliveriesOnly = try Self.run(world, threads: threads, decisions: false)
    var files = run.bytes
    files["decisions.ndjson.lz4"] = nil
    #expect(deliveriesOnly.bytes == files, "seed \(seed)")
    for key in ["delivered", "deferred", "deliveries", "suppressed", "notifications"] {
      let (without, with) = (
        deliveriesOnly.summary[key] as? NSObject, run.summary[key] as? NSObject
      )
      #expect(with != nil && without == with, "seed \(seed) \(key)")
    }
  }

  @Test("the v3 worlds reach hides by both caps, removals and cancellations")
  func coverage() {
    var hidden = 0
    var removed = 0
    var cancelled = 0
    var sizeCapped = 0
    var countCapped = 0
    for seed in UInt64(301)...318 {
      let world = RandomWorld(seed: seed, v3: true)
      let expected = ReferenceEvaluator(world).notifications()
      hidden += expected.counts.hidden
      removed += expected.counts.removed
      cancelled += expected.counts.cancelled
      if world.groups?.size != nil && expected.counts.hidden > 0 { sizeCapped += 1 }
      if world.groups?.count != nil && expected.counts.hidden > 0 { countCapped += 1 }
    }
    #expect(hidden > 100, "\(hidden)")
    #expect(removed > 100, "\(removed)")
    #expect(cancelled > 5, "\(cancelled)")
    #expect(sizeCapped > 2 && countCapped > 2, "\(sizeCapped) \(countCapped)")
  }

  @Test("the same bytes with 1, 2 and 7 threads")
  func threads() throws {
    let world = RandomWorld(seed: 333, users: 60, messages: 600, v3: true)
    let one = try Self.run(world, threads: 1)
    for threads in [2, 7] {
      let other = try Self.run(world, threads: threads)
      #expect(other.bytes == one.bytes, "\(threads) threads")
    }
    #expect(one.bytes["updates.ndjson.lz4"] != nil)
    // Counting only (no fields built): the same counts and update lines.
    let counts = try Self.run(world, threads: 2, summaryOnly: true)
    #expect(counts.bytes["updates.ndjson.lz4"] == one.bytes["updates.ndjson.lz4"])
    for key in ["delivered", "deferred", "deliveries", "suppressed", "notifications"] {
      let (counted, written) = (counts.summary[key] as? NSObject, one.summary[key] as? NSObject)
      #expect(written != nil && counted == written, "\(key)")
    }
    #expect((one.summary["notifications"] as? [String: Int])?["hidden"] ?? 0 > 0)
  }

  @Test("the same bytes when the ledgers judge the traffic a batch at a time")
  func ledgerRuns() throws {
    // Three parse batches (1,024 lines each) in one wave: with runs of
    // one chunk, each batch is judged and evaluated on its own.
    let world = RandomWorld(seed: 334, users: 60, messages: 3_000, v3: true)
    #expect(world.groups != nil)
    let whole = try Self.run(world, threads: 2)
    let runs = try Self.run(world, threads: 2, ledgerChunks: 1)
    #expect(runs.bytes == whole.bytes)
    #expect(runs.summary["notifications"] as? NSDictionary != nil)
    #expect(
      runs.summary["notifications"] as? NSDictionary
        == whole.summary["notifications"] as? NSDictionary)
    #expect(whole.updates.count > 10, "\(whole.updates.count)")
  }
}
