// Snapshot load against its limit: a raw SQLite scan of the same columns.
import Benchmark
import FanoutSnapshot

let benchmarks: @Sendable () -> Void = {
  BenchmarkData.ensure()
  Benchmark.defaultConfiguration = .init(
    metrics: [.wallClock, .cpuTotal, .peakMemoryResident, .mallocCountTotal],
    maxDuration: .seconds(20), maxIterations: 5,
    thresholds: tolerances)

  Benchmark("SnapshotLoad") { benchmark in
    blackHole(try SnapshotLoader.load(path: BenchmarkData.snapshot).index.memberCount)
  }

  Benchmark("RawSQLiteScan-limit") { benchmark in
    blackHole(try RawScan.run(path: BenchmarkData.snapshot))
  }
}
