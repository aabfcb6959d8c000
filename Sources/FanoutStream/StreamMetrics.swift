import FanoutIndex
import FanoutModel
import FanoutOutput
import FanoutPipeline
import FanoutTime

#if canImport(Glibc)
  import Glibc
#endif

/// Batch latencies on a log scale: 8 buckets per doubling of microseconds,
/// so a percentile read from it is at most 9 % above the true value.
struct LatencyHistogram {
  private var buckets = [Int](repeating: 0, count: 8 * 40)
  private(set) var count = 0

  mutating func add(seconds: Double) {
    let micros = max(0, seconds * 1e6)
    let b = min(buckets.count - 1, Int((log2(micros + 1) * 8).rounded(.down)))
    buckets[b] += 1
    count += 1
  }

  /// The upper bound of the bucket holding the `p` quantile, in milliseconds.
  func percentileMillis(_ p: Double) -> Double {
    guard count > 0 else { return 0 }
    let rank = max(1, Int((p * Double(count)).rounded(.up)))
    var seen = 0
    for (b, n) in buckets.enumerated() {
      seen += n
      if seen >= rank { return (exp2(Double(b + 1) / 8) - 1) / 1000 }
    }
    return 0
  }
}

/// Running totals of the stream.
struct StreamTotals {
  var batches = 0
  var lines = 0
  var messages = 0
  var rejected = 0
  var pairs = 0
  var delivered = 0

  mutating func add(_ batch: EvaluatedBatch) {
    batches += 1
    lines += batch.lines
    messages += batch.counters.messages
    rejected += batch.rejected
    pairs += batch.counters.pairs
    delivered += batch.counters.delivered
  }
}

/// What the status line and the metrics file report: totals since the
/// start, and rates and latencies over the last interval.
struct StreamMetrics {
  let started = ContinuousClock.now
  /// The metrics file in Prometheus' format instead of JSON (a `.prom` path).
  private let prometheus: PrometheusExposition?
  private(set) var total = StreamTotals()
  private(set) var runLatency = LatencyHistogram()
  private var interval = StreamTotals()
  private var intervalLatency = LatencyHistogram()
  private(set) var intervalStart = ContinuousClock.now

  init(metricsPath: String?) {
    prometheus = metricsPath?.hasSuffix(".prom") == true ? PrometheusExposition() : nil
  }

  mutating func record(_ batch: EvaluatedBatch, latency: Duration) {
    total.add(batch)
    interval.add(batch)
    runLatency.add(seconds: latency.seconds)
    intervalLatency.add(seconds: latency.seconds)
    prometheus?.record(batch, latency: latency)
  }

  struct Report {
    var line: String
    /// The interval's metrics as a JSON object (the status event's fields).
    var json: JSONValue
    /// The metrics file's content: JSON, or Prometheus' text format.
    var file: [UInt8]
  }

  /// The status line and metrics file for the interval just ended; starts the next.
  /// - Parameter lag: for a message bus, its entries read and not yet
  ///   acknowledged, and those not yet read (when the bus knows).
  mutating func closeInterval(
    queueDepth: Int, queueCapacity: Int, snapshot: LoadedSnapshot, reloadsRefused: Int,
    lag: (pending: Int64, behind: Int64?)? = nil
  ) -> Report {
    let seconds = max(1e-9, (ContinuousClock.now - intervalStart).seconds)
    let messagesPerSecond = Int((Double(interval.messages) / seconds).rounded())
    let pairsPerSecond = Int((Double(interval.pairs) / seconds).rounded())
    let p50 = intervalLatency.percentileMillis(0.5)
    let p99 = intervalLatency.percentileMillis(0.99)
    let line =
      "\(messagesPerSecond) messages/s, \(pairsPerSecond) pairs/s, "
      + "batch latency p50 \(threeDecimals(p50)) ms p99 \(threeDecimals(p99)) ms, "
      + "queue \(queueDepth)/\(queueCapacity), snapshot generation \(snapshot.generation)"
      + (lag.map { ", lag: \($0.pending) pending, \($0.behind.map(String.init) ?? "?") not read" }
        ?? "")
    func int(_ i: Int) -> JSONValue { .int(Int64(i)) }
    var fields: [(String, JSONValue)] = [
      ("time", .string(LocalTime.rfc3339UTC(millis: WallClock.nowMillis()))),
      ("uptime_seconds", .number(threeDecimals((ContinuousClock.now - started).seconds))),
      ("interval_seconds", .number(threeDecimals(seconds))), ("batches", int(total.batches)),
      ("lines", int(total.lines)), ("messages", int(total.messages)),
      ("rejected", int(total.rejected)), ("pairs", int(total.pairs)),
      ("delivered", int(total.delivered)), ("messages_per_second", int(messagesPerSecond)),
      ("pairs_per_second", int(pairsPerSecond)),
      (
        "batch_latency_ms",
        .object([
          ("p50", .number(threeDecimals(p50))), ("p99", .number(threeDecimals(p99))),
          ("batches", int(interval.batches)),
        ])
      ),
      ("queue_depth", int(queueDepth)), ("queue_capacity", int(queueCapacity)),
      ("snapshot", snapshot.json), ("snapshots_refused", int(reloadsRefused)),
    ]
    if let lag {
      fields.append(
        ("lag", .object([("pending", .int(lag.pending)), ("not_read", .optional(lag.behind))])))
    }
    let json = JSONValue.object(fields)
    interval = StreamTotals()
    intervalLatency = LatencyHistogram()
    intervalStart = .now
    let file =
      prometheus?.text(
        queueDepth: queueDepth, queueCapacity: queueCapacity, snapshot: snapshot,
        reloadsRefused: reloadsRefused, lag: lag) ?? Array((json.rendered(.line) + "\n").utf8)
    return Report(line: line, json: json, file: file)
  }

  /// The last event's fields: the totals and latency over the whole run.
  func finalFields(reason: String) -> KeyValuePairs<String, LogValue> {
    [
      "reason": .text(reason), "lines": .int(total.lines), "messages": .int(total.messages),
      "rejected": .int(total.rejected), "pairs": .int(total.pairs),
      "delivered": .int(total.delivered), "batches": .int(total.batches),
      "seconds": .decimal((ContinuousClock.now - started).seconds),
      "batch_latency_p50_ms": .decimal(runLatency.percentileMillis(0.5)),
      "batch_latency_p99_ms": .decimal(runLatency.percentileMillis(0.99)),
    ]
  }

  /// The last line: totals and latency over the whole run.
  func finalLine(reason: String) -> String {
    let seconds = max(1e-9, (ContinuousClock.now - started).seconds)
    return
      "stopped (\(reason)): \(counted(total.lines, "line")), \(counted(total.messages, "message")), "
      + "\(total.rejected) rejected, \(counted(total.pairs, "pair")), \(total.delivered) delivered "
      + "in \(counted(total.batches, "batch", "batches")) over \(threeDecimals(seconds)) s "
      + "(\(Int((Double(total.pairs) / seconds).rounded())) pairs/s); batch latency p50 "
      + "\(threeDecimals(runLatency.percentileMillis(0.5))) ms p99 \(threeDecimals(runLatency.percentileMillis(0.99))) ms"
  }
}

/// Rewrites the metrics file whole: written aside, then renamed over the old one.
func writeMetrics(_ content: [UInt8], to path: String) throws(OutputError) {
  let (directory, name) = splitPath(path)
  let file = try PendingFile(directory: directory, name: name)
  try file.write(content)
  try file.commit()
}

/// A file path's folder and name (`.` for a bare name, `/` at the root).
func splitPath(_ path: String) -> (directory: String, name: String) {
  let slash = path.lastIndex(of: "/")
  let directory = slash.map { String(path[..<$0]) } ?? "."
  let name = slash.map { String(path[path.index(after: $0)...]) } ?? path
  return (directory.isEmpty ? "/" : directory, name)
}
