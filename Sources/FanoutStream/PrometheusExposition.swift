import Prometheus

/// The metrics file in Prometheus' text exposition format (`--metrics
/// NAME.prom`), for node_exporter's textfile collector: totals since the
/// stage started as counters, the state at the last status as gauges, and
/// the batch latencies as a histogram. The collector scrapes the file, so
/// it is rewritten whole at every status line, like the JSON form.
final class PrometheusExposition {
  private let registry: PrometheusCollectorRegistry
  private let batches: Counter
  private let lines: Counter
  private let messages: Counter
  private let rejected: Counter
  private let pairs: Counter
  private let delivered: Counter
  private let reloads: Counter
  private let reloadsRefused: Counter
  private let generation: Gauge
  private let queueDepth: Gauge
  private let queueCapacity: Gauge
  private let latency: DurationHistogram
  /// Created on first use: gateways come from the snapshot, lag from a bus.
  private var deliveries: [String: Counter] = [:]
  private var lag: (pending: Gauge, notRead: Gauge)?
  private var counted = (reloads: 0, refused: 0)

  /// `fanout_stream_<name>_<unit>`.
  private static func descriptor(_ name: String, _ unit: String, _ help: String)
    -> MetricNameDescriptor
  {
    MetricNameDescriptor(
      namespace: "fanout", subsystem: "stream", metricName: name, unitName: unit, helpText: help)
  }

  init() {
    let descriptor = Self.descriptor
    let registry = PrometheusCollectorRegistry()
    self.registry = registry
    func counter(_ name: String, _ help: String) -> Counter {
      registry.makeCounter(descriptor: descriptor(name, "total", help))
    }
    func gauge(_ name: String, _ help: String) -> Gauge {
      registry.makeGauge(descriptor: descriptor(name, "", help))
    }
    batches = counter("batches", "Batches evaluated and written.")
    lines = counter("lines", "Input lines read.")
    messages = counter("messages", "Messages evaluated.")
    rejected = counter("rejected_lines", "Input lines rejected.")
    pairs = counter("pairs", "(message, recipient) pairs evaluated.")
    delivered = counter("delivered_pairs", "Pairs that got a notification.")
    reloads = counter("snapshot_reloads", "Snapshots reloaded and put in use.")
    reloadsRefused = counter("snapshot_reloads_refused", "New snapshots refused.")
    generation = gauge("snapshot_generation", "The generation of the snapshot in use.")
    queueDepth = gauge("queue_depth", "Blocks of lines read and not yet evaluated.")
    queueCapacity = gauge("queue_capacity", "Blocks the queue holds before reading pauses.")
    // 1 ms to 10 s: a batch waits at most --batch-ms (default 50 ms) for lines.
    let bounds = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000]
    latency = registry.makeDurationHistogram(
      descriptor: descriptor(
        "batch_latency", "seconds",
        "From a batch's first line read to its output written (and, on a bus, acknowledged)."),
      labels: [], buckets: bounds.map { .milliseconds($0) })
  }

  func record(_ batch: EvaluatedBatch, latency duration: Duration) {
    batches.increment()
    lines.increment(by: Int64(batch.lines))
    messages.increment(by: Int64(batch.counters.messages))
    rejected.increment(by: Int64(batch.rejected))
    pairs.increment(by: Int64(batch.counters.pairs))
    delivered.increment(by: Int64(batch.counters.delivered))
    for (g, name) in batch.gatewayNames.enumerated() where batch.counters.deliveries[g] > 0 {
      deliveriesCounter(name).increment(by: Int64(batch.counters.deliveries[g]))
    }
    latency.record(duration)
  }

  private func deliveriesCounter(_ gateway: String) -> Counter {
    if let counter = deliveries[gateway] { return counter }
    let counter = registry.makeCounter(
      descriptor: Self.descriptor(
        "deliveries", "total", "Recipients delivered through each gateway (a pair can use several)."
      ),
      labels: [("gateway", gateway)])
    deliveries[gateway] = counter
    return counter
  }

  /// The file's content, with the gauges set to the state at this status.
  func text(
    queueDepth depth: Int, queueCapacity capacity: Int, snapshot: LoadedSnapshot,
    reloadsRefused refused: Int, lag busLag: (pending: Int64, behind: Int64?)?
  ) -> [UInt8] {
    generation.set(Int64(snapshot.generation))
    reloads.increment(by: Int64(snapshot.generation - 1 - counted.reloads))
    reloadsRefused.increment(by: Int64(refused - counted.refused))
    counted = (snapshot.generation - 1, refused)
    queueDepth.set(Int64(depth))
    queueCapacity.set(Int64(capacity))
    if let busLag {
      let gauges =
        lag
        ?? (
          registry.makeGauge(
            descriptor: Self.descriptor(
              "lag_pending", "", "Bus entries delivered to this group and not yet acknowledged.")),
          registry.makeGauge(
            descriptor: Self.descriptor(
              "lag_not_read", "", "Bus entries not yet read by this group (-1: unknown)."))
        )
      lag = gauges
      gauges.pending.set(busLag.pending)
      gauges.notRead.set(busLag.behind ?? -1)
    }
    return Self.inStableOrder(registry.emitToBuffer())
  }

  /// The registry's text with its metric families in name order, and the
  /// samples of a labelled counter or gauge in label order (histogram
  /// buckets keep theirs): the registry emits them in hash order, which
  /// differs from one process to the next, and the file should not. The
  /// format ends with a line feed; the registry stops short of it.
  static func inStableOrder(_ emitted: [UInt8]) -> [UInt8] {
    var families: [(name: String, lines: [Substring])] = []
    for line in String(decoding: emitted, as: UTF8.self).split(separator: "\n") {
      if line.hasPrefix("# HELP ") || families.isEmpty {
        let name = line.split(separator: " ").dropFirst(2).first.map(String.init) ?? ""
        families.append((name, []))
      }
      families[families.count - 1].lines.append(line)
    }
    var text = ""
    for family in families.sorted(by: { $0.name < $1.name }) {
      let comments = family.lines.prefix { $0.hasPrefix("#") }
      var samples = Array(family.lines.dropFirst(comments.count))
      if !comments.contains(where: { $0.hasSuffix(" histogram") }) { samples.sort() }
      for line in comments + samples { text += line + "\n" }
    }
    return Array(text.utf8)
  }
}
