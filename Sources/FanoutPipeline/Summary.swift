import FanoutKernel
import FanoutModel

/// summary.json: counts in a fixed key order, then the run's times.
package enum Summary {
  static func json(_ report: RunReport, files: [WrittenFile] = []) -> [UInt8] {
    let c = report.counters
    let deliveries = report.gatewayNames.indices.filter { c.deliveries[$0] > 0 }
      .map { "\"\(report.gatewayNames[$0])\": \(c.deliveries[$0])" }
    let suppressed = Reason.allCases.map { "\"\($0.name)\": \(c.suppressed[Int($0.rawValue)])" }
    let t = report.timings
    let text = """
      {
        "messages": \(c.messages),
        "reads": \(report.reads),
        "rejected": \(report.rejected),
        "pairs": \(c.pairs),
        "delivered": \(c.delivered),
        "deferred": \(c.deferred),\(report.notifications.map(notificationsJSON) ?? "")
        "deliveries": {\(deliveries.joined(separator: ", "))},
        "suppressed": {\(suppressed.joined(separator: ", "))},
        "seconds": \(seconds(report.seconds)),
        "pairs_per_second": \(Int(report.pairsPerSecond.rounded())),
        "timings": {"load": \(seconds(t.load)), "parse": \(seconds(t.parse)), "evaluate": \(seconds(t.evaluate)), "write": \(seconds(t.write)), "cpu_user": \(seconds(t.cpuUser)), "cpu_system": \(seconds(t.cpuSystem))}\(report.shard.map { shardJSON($0, files: files) } ?? "")
      }

      """
    return Array(text.utf8)
  }

  /// `\n  "notifications": {…},` (contract v3).
  package static func notificationsJSON(_ n: NotificationCounters) -> String {
    #"\#n  "notifications": {"hidden": \#(n.hidden), "removed": \#(n.removed), "cancelled": \#(n.cancelled), "unread": \#(n.unread)},"#
  }

  /// `,\n  "shard": {…}`: what `fanout merge` checks before merging: the
  /// shard and its split, the traffic, and every file written with its
  /// size and XXH64 digest.
  static func shardJSON(_ run: ShardRun, files: [WrittenFile]) -> String {
    let split = run.label.split.map { #""split": "\#($0)", "# } ?? ""
    let listed = files.map {
      #"{"name": \#(String(decoding: JSONText.quoted($0.name), as: UTF8.self)), "bytes": \#($0.bytes), "xxh64": "\#(ShardLabel.hex($0.digest))"}"#
    }
    return """
      ,
        "shard": {"index": \(run.label.index), "count": \(run.label.count), \(split)"traffic_lines": \(run.trafficLines), \
      "traffic_digest": "\(run.digestHex)", "output": "\(run.output)", "files": [\(listed.joined(separator: ", "))]}
      """
  }

  /// Seconds to the microsecond, never in exponent form.
  package static func seconds(_ s: Double) -> String {
    let micros = Int((s * 1e6).rounded())
    let fraction = String(micros % 1_000_000)
    return "\(micros / 1_000_000).\(String(repeating: "0", count: 6 - fraction.count))\(fraction)"
  }
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
