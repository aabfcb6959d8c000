import FanoutEngine
import FanoutKernel
import FanoutModel

/// summary.json: counts in a fixed key order, then the run's times; one
/// key per line, each value on its line (`JSONLayout.keyPerLine`).
package enum Summary {
  static func json(_ report: RunReport, files: [WrittenFile] = []) -> [UInt8] {
    let c = report.counters
    let t = report.timings
    var fields = counts(
      messages: c.messages, reads: report.reads, rejected: report.rejected, pairs: c.pairs,
      delivered: c.delivered, deferred: c.deferred, notifications: report.notifications,
      deliveries: report.gatewayNames.indices.filter { c.deliveries[$0] > 0 }.map {
        (report.gatewayNames[$0], c.deliveries[$0])
      },
      suppressed: Reason.allCases.map { ($0.name, c.suppressed[Int($0.rawValue)]) })
    let phases = [
      ("load", t.load), ("parse", t.parse), ("evaluate", t.evaluate), ("write", t.write),
    ]
    let times =
      phases.map { ($0, $1.seconds) } + [("cpu_user", t.cpuUser), ("cpu_system", t.cpuSystem)]
    let cores = phases.map { ($0, JSONValue.number(fixedPoint($1.cores, decimals: 2))) }
    fields += [
      ("seconds", .number(seconds(report.seconds))),
      ("pairs_per_second", .int(Int64(report.pairsPerSecond.rounded()))),
      ("timings", .object(times.map { ($0, .number(seconds($1))) } + [("cores", .object(cores))])),
    ]
    if let shard = report.shard { fields.append(("shard", shardJSON(shard, files: files))) }
    return document(fields)
  }

  /// The counts a run writes first, and a merge of shards writes summed.
  package static func counts(
    messages: Int, reads: Int, rejected: Int, pairs: Int, delivered: Int, deferred: Int,
    notifications n: NotificationCounters?, deliveries: [(String, Int)],
    suppressed: [(String, Int)]
  ) -> [(String, JSONValue)] {
    var fields: [(String, JSONValue)] = [
      ("messages", messages), ("reads", reads), ("rejected", rejected), ("pairs", pairs),
      ("delivered", delivered), ("deferred", deferred),
    ].map { ($0, .int(Int64($1))) }
    if let n {  // contract v3
      fields.append(
        (
          "notifications",
          .object(
            [
              ("hidden", n.hidden), ("removed", n.removed), ("cancelled", n.cancelled),
              ("unread", n.unread),
            ].map { ($0, .int(Int64($1))) })
        ))
    }
    fields.append(("deliveries", .object(deliveries.map { ($0, .int(Int64($1))) })))
    fields.append(("suppressed", .object(suppressed.map { ($0, .int(Int64($1))) })))
    return fields
  }

  /// The file's bytes: one key per line, each value on one line.
  package static func document(_ fields: [(String, JSONValue)]) -> [UInt8] {
    Array((JSONValue.object(fields).rendered(.keyPerLine) + "\n").utf8)
  }

  /// What `fanout merge` checks before merging: the shard and its split,
  /// the traffic, and every file written with its size and XXH64 digest.
  static func shardJSON(_ run: ShardRun, files: [WrittenFile]) -> JSONValue {
    var fields: [(String, JSONValue)] = [
      ("index", .int(Int64(run.label.index))), ("count", .int(Int64(run.label.count))),
    ]
    if let split = run.label.split { fields.append(("split", .string(split))) }
    fields += [
      ("traffic_lines", .int(Int64(run.trafficLines))),
      ("traffic_digest", .string(run.digestHex)), ("output", .string(run.output)),
      (
        "files",
        .array(
          files.map {
            .object([
              ("name", .string($0.name)), ("bytes", .int(Int64($0.bytes))),
              ("xxh64", .string(ShardLabel.hex($0.digest))),
            ])
          })
      ),
    ]
    return .object(fields)
  }

  /// Seconds to the microsecond, never in exponent form.
  package static func seconds(_ s: Double) -> String { fixedPoint(s, decimals: 6) }
}

/// A `--mergeable` run of one shard, as summary.json records it.
public struct ShardRun: Sendable, Equatable {
  public var label: ShardLabel
  public var trafficLines: Int
  public var trafficDigest: UInt64
  /// "deliveries", "deliveries+decisions" or "counts": shards merge only
  /// with shards that wrote the same files.
  public var output: String

  public init(label: ShardLabel, trafficLines: Int, trafficDigest: UInt64, output: String) {
    self.label = label
    self.trafficLines = trafficLines
    self.trafficDigest = trafficDigest
    self.output = output
  }

  init(
    label: ShardLabel, trafficLines: Int, trafficDigest: UInt64, decisions: Bool,
    summaryOnly: Bool
  ) {
    self.init(
      label: label, trafficLines: trafficLines, trafficDigest: trafficDigest,
      output: summaryOnly ? "counts" : decisions ? "deliveries+decisions" : "deliveries")
  }

  public var digestHex: String { ShardLabel.hex(trafficDigest) }
}

/// A file a run wrote: its name in the output folder, size and XXH64 digest.
public struct WrittenFile: Sendable, Equatable {
  public var name: String
  public var bytes: Int
  public var digest: UInt64
}
