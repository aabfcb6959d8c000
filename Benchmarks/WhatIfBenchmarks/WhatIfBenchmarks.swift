// A sweep of five variants against one `whatif` of its costliest variant:
// the sweep evaluates the traffic once against A and all five (issue 37's
// target: at most 2× the one); and a sweep of five throttles against one
// of them (judged together, over one ledger), and a sweep of the three quiet
// hours (decided again in one walk). All read A from an index cache filled
// before the runs, as `fanout whatif` does. Beside them, `fanout eval` of
// the same traffic with the same cache (issue 39's target: one `whatif`
// at most 1.5× that).
import Benchmark
import FanoutPipeline
import FanoutSnapshot
import FanoutWhatIf
import Foundation

let benchmarks: @Sendable () -> Void = {
  BenchmarkData.ensure()
  let metrics: [BenchmarkMetric] = [.wallClock, .cpuTotal, .peakMemoryResident, .mallocCountTotal]
  Benchmark.defaultConfiguration = .init(
    metrics: metrics, maxDuration: .seconds(30), maxIterations: 5,
    thresholds: tolerances.filter { metrics.contains($0.key) })

  let scenarios =
    URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    .appendingPathComponent("../../datasets/scenarios").standardized.path
  func sql(_ name: String) -> String {
    try! String(contentsOfFile: "\(scenarios)/\(name).sql", encoding: .utf8)
  }
  let cache = IndexCache(directory: NSTemporaryDirectory() + "/fanout-bench-index-cache")
  func options(_ scenario: WhatIfOptions.Scenario) -> WhatIfOptions {
    var options = WhatIfOptions(
      snapshot: BenchmarkData.snapshot, scenario: scenario, messages: BenchmarkData.traffic,
      out: NSTemporaryDirectory() + "/fanout-bench-whatif", threads: 2, overwrite: true)
    options.indexCache = cache
    return options
  }
  let fillCache = { _ = try SnapshotLoader.load(path: BenchmarkData.snapshot, cache: cache) }

  Benchmark("EvalFromCache", configuration: .init(setup: fillCache)) { _ in
    var options = EvalOptions(
      snapshot: BenchmarkData.snapshot, messages: BenchmarkData.traffic,
      out: NSTemporaryDirectory() + "/fanout-bench-eval-cached", threads: 2, overwrite: true)
    options.indexCache = cache
    blackHole(try Pipeline.eval(options).counters.delivered)
  }

  Benchmark("WhatIf-quiet-hours-22-08", configuration: .init(setup: fillCache)) { _ in
    blackHole(try WhatIf.run(options(.sql(sql("quiet-hours-22-08")))).changedPairs)
  }

  Benchmark("WhatIfSweep-5", configuration: .init(setup: fillCache)) { _ in
    let variants = [
      "defer-quiet-hours", "quiet-hours-21-07", "quiet-hours-22-08", "quiet-hours-23-09",
      "throttle-3-per-10-minutes",
    ].map { WhatIfOptions.Variant(name: $0, sql: sql($0)) }
    blackHole(try WhatIf.sweep(options(.sql("")), variants: variants).variants.count)
  }

  Benchmark("WhatIfSweep-quiet-hours-3", configuration: .init(setup: fillCache)) { _ in
    let variants = ["quiet-hours-21-07", "quiet-hours-22-08", "quiet-hours-23-09"].map {
      WhatIfOptions.Variant(name: $0, sql: sql($0))
    }
    blackHole(try WhatIf.sweep(options(.sql("")), variants: variants).variants.count)
  }

  func throttle(_ messages: Int) -> String {
    """
    INSERT OR REPLACE INTO settings VALUES ('throttle_messages', '\(messages)'),
      ('throttle_window_ms', '600000')
    """
  }
  Benchmark("WhatIf-throttle-3-per-10-minutes", configuration: .init(setup: fillCache)) { _ in
    blackHole(try WhatIf.run(options(.sql(throttle(3)))).changedPairs)
  }

  Benchmark("WhatIfSweep-throttles-5", configuration: .init(setup: fillCache)) { _ in
    let variants = [1, 2, 3, 5, 10].map {
      WhatIfOptions.Variant(name: "throttle-\($0)", sql: throttle($0))
    }
    blackHole(try WhatIf.sweep(options(.sql("")), variants: variants).variants.count)
  }
}
