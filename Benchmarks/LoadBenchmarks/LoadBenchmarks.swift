// Snapshot load against its limit: a raw SQLite scan of the same columns.
import Benchmark
import FanoutSnapshot

let benchmarks: @Sendable () -> Void = {
  BenchmarkData.ensure()
  Benchmark.defaultConfiguration = .init(
    metrics: [.wallClock, .cpuTotal, .peakMemoryResident, .mallocCountTotal],
    maxDuration: .seconds(20), maxIterations: 5,
    thresholds: [.mallocCountTotal: .init(relative: [.p90: 5])])

  Benchmark("Snapshot load") { benchmark in
    blackHole(try SnapshotLoader.load(path: BenchmarkData.snapshot).index.memberCount)
  }

  Benchmark("Raw SQLite scan (limit)") { benchmark in
    blackHole(try RawScan.run(path: BenchmarkData.snapshot))
  }
}
