import FanoutIndex
import FanoutKernel
import FanoutSnapshot
import FanoutTraffic
import Foundation

/// Evaluates messages against a snapshot built from SQL, through the real
/// loader, parser and kernel, and exposes the decisions and deliveries.
public struct Scenario {
  public let index: Index
  public let batch: MessageBatch
  public let result: ChunkResult

  /// `sql` populates the contract's schema; `messages` are NDJSON lines.
  public init(_ sql: String, messages: [String]) throws {
    try self.init(snapshot: SQLiteFixture.make(SQLiteFixture.header + sql), messages: messages)
  }

  /// Evaluates a random world's messages against it.
  public init(world: RandomWorld) throws {
    try self.init(snapshot: world.makeSnapshot(), messages: world.messages)
  }

  /// Evaluates `messages` against the snapshot file at `path`.
  public init(snapshot path: String, messages: [String]) throws {
    let snapshot = try SnapshotLoader.load(path: path)
    index = snapshot.index
    let batch = parseTraffic(messages, index: index)
    self.batch = batch
    let throttled = throttledMembers(batch, index: index)
    let evaluator = Evaluator(index: index, output: .deliveriesAndDecisions)
    var result = ChunkResult(gateways: index.gateways.count)
    evaluator.evaluate(batch, messages: 0..<batch.count, throttled: throttled, into: &result)
    self.result = result
  }

  /// The delivery lines (`.deliveries`), with decision lines
  /// (`.deliveriesAndDecisions`), or counts alone (`.counts`), and the
  /// counters, as `fanout eval` makes them where a ledger runs (a
  /// throttle, notification groups): from what the pass before the
  /// ledgers found (`LedgerPass.deliveries`, or `.outcomes` with
  /// decisions), no pair decided again; nil without a ledger.
  public func fromPass(_ output: Evaluator.Output) -> ChunkResult? {
    let pass: LedgerPass =
      output == .deliveriesAndDecisions ? .outcomes(localHours: false) : .deliveries
    guard let ledgers = Ledgers(index: index, threads: 2, pass: pass) else { return nil }
    let found = ledgers.judge([batch], plan: [(0, 0..<batch.count)])
    let evaluator = Evaluator(index: index, output: output)
    var result = ChunkResult(gateways: index.gateways.count)
    evaluator.evaluate(
      batch, messages: 0..<batch.count, throttled: found.throttled[0],
      notifications: found.notifications?.fields[0], passed: found.evaluated[0], into: &result)
    return result
  }

  /// Decision lines as `message/user` → trigger (delivered) or `-reason`.
  public var decisions: [String: String] {
    var out: [String: String] = [:]
    for line in String(decoding: result.decisionLines, as: UTF8.self).split(separator: "\n") {
      let object = try! JSONSerialization.jsonObject(with: Data(line.utf8)) as! [String: Any]
      let key = "\(object["message"]!)/\(object["user"]!)"
      out[key] =
        (object["deliver"] as! Bool)
        ? (object["trigger"] as! String) + ((object["deliver_at"] as? Int).map { "@\($0)" } ?? "")
        : "-" + (object["reason"] as! String)
    }
    return out
  }

  /// The outcome for one pair: a trigger name (with `@deliver_at` when
  /// deferred), `-reason`, or nil if no pair.
  public func outcome(_ message: String, _ user: String) -> String? {
    decisions["\(message)/\(user)"]
  }

  /// The delivery lines written for `gateway`, parsed.
  public func deliveries(_ gateway: String) -> [[String: Any]] {
    guard let g = index.gateways.find(gateway) else { return [] }
    return String(decoding: result.gatewayLines[Int(g)], as: UTF8.self).split(separator: "\n").map {
      try! JSONSerialization.jsonObject(with: Data($0.utf8)) as! [String: Any]
    }
  }
}

/// Rule 8's verdicts for `batch`, over its lines in order, as the
/// evaluation engine finds them; nil when `index` sets no throttle.
public func throttledMembers(_ batch: MessageBatch, index: Index) -> ThrottledMembers? {
  guard index.settings.throttle != nil else { return nil }
  return Ledgers(index: index, threads: 2)!.judge([batch], plan: [(0, 0..<batch.count)])
    .throttled[0]
}

/// NDJSON lines parsed against `index`, numbered from 1.
public func parseTraffic(_ lines: [String], index: Index) -> MessageBatch {
  var parser = TrafficParser(index: index)
  for (i, line) in lines.enumerated() {
    var bytes = Array(line.utf8)
    bytes.withUnsafeMutableBytes { parser.parse(UnsafeRawBufferPointer($0), line: i + 1) }
  }
  return parser.finish()
}

/// A message line with the given fields (values as JSON text).
public func message(_ fields: KeyValuePairs<String, String>) -> String {
  "{" + fields.map { "\"\($0.key)\":\($0.value)" }.joined(separator: ",") + "}"
}
