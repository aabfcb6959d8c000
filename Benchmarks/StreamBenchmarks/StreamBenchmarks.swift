// `fanout stream` on the generated traffic, written into the stage's
// standard input (a pipe) by a writer thread; batches of the default size,
// 2 threads, segment files. Two runs:
// - Saturated: the writer goes as fast as the stage reads; pairs/s is the
//   stage's ceiling, and the latency includes the wait in a full queue.
// - At 1M pairs/s: the writer paces the lines so that they carry one
//   million pairs a second, eight times over the traffic; the stage must
//   keep up (pairs/s close to 1M) and the batch latency p99 is the figure
//   of merit.
// Batch latency: from a line's arrival to its batch being written.
import Benchmark
import FanoutEngine
import FanoutPipeline
import FanoutSnapshot
import FanoutStream
import FanoutTraffic
import Foundation

let pairsPerSecond = BenchmarkMetric.custom(
  "pairs/s", polarity: .prefersLarger, useScalingFactor: false)
let batchLatencyP99 = BenchmarkMetric.custom(
  "batch p99 (µs)", polarity: .prefersSmaller, useScalingFactor: false)

let benchmarks: @Sendable () -> Void = {
  BenchmarkData.ensure()
  let traffic = Array(FileManager.default.contents(atPath: BenchmarkData.traffic)!)
  let lineEnds = traffic.indices.filter { traffic[$0] == 0x0A }.map { $0 + 1 }
  let pairs: Int = {
    let index = try! SnapshotLoader.load(path: BenchmarkData.snapshot).index
    let block = try! LineReader(path: BenchmarkData.traffic).next(maxLines: Int.max)!
    return Engine.parse(block, index: index, workers: 2).reduce(0) { total, batch in
      total + (0..<batch.count).reduce(0) { $0 + index.members(of: batch.channel[$1]).count }
    }
  }()
  var thresholds = tolerances
  thresholds[batchLatencyP99] = .init(relative: [.p90: 50])
  Benchmark.defaultConfiguration = .init(
    metrics: [.wallClock, .peakMemoryResident, pairsPerSecond, batchLatencyP99],
    maxDuration: .seconds(60), maxIterations: 3, thresholds: thresholds)

  /// Runs the stage over the traffic, `passes` times over, with the lines
  /// paced at `linesPerSecond` (nil: as fast as the stage reads).
  func run(_ benchmark: Benchmark, passes: Int, linesPerSecond: Double?) throws {
    var fds: [Int32] = [0, 0]
    precondition(pipe(&fds) == 0 && dup2(fds[0], STDIN_FILENO) == STDIN_FILENO)
    close(fds[0])
    let out = NSTemporaryDirectory() + "/fanout-bench-stream"
    try? FileManager.default.removeItem(atPath: out)
    var options = StreamOptions(
      snapshot: BenchmarkData.snapshot, input: .standardInput, destination: .directory(out))
    options.threads = 2
    let stage = try options.makeStage()  // loads the snapshot: not measured

    benchmark.startMeasurement()
    let writeEnd = fds[1]
    let writer = Thread {
      let started = ContinuousClock.now
      let total = passes * lineEnds.count
      var written = 0  // lines, over all passes
      traffic.withUnsafeBytes { raw in
        while written < total {
          var due = total
          if let linesPerSecond {
            let elapsed = (ContinuousClock.now - started).components
            let seconds = Double(elapsed.seconds) + Double(elapsed.attoseconds) * 1e-18
            due = min(total, Int(seconds * linesPerSecond))
            if due <= written {
              usleep(1_000)
              continue
            }
          }
          // Up to the due line or the end of this pass, whichever is first.
          let pass = written / lineEnds.count
          let last = min(due, (pass + 1) * lineEnds.count) - pass * lineEnds.count
          let first = written - pass * lineEnds.count
          var done = first == 0 ? 0 : lineEnds[first - 1]
          while done < lineEnds[last - 1] {
            let n = write(writeEnd, raw.baseAddress! + done, lineEnds[last - 1] - done)
            precondition(n > 0)
            done += n
          }
          written = pass * lineEnds.count + last
        }
      }
      close(writeEnd)
    }
    writer.start()
    let start = ContinuousClock.now
    let report = try stage.run()
    let d = (ContinuousClock.now - start).components
    benchmark.stopMeasurement()

    let seconds = Double(d.seconds) + Double(d.attoseconds) * 1e-18
    benchmark.measurement(pairsPerSecond, Int(Double(report.pairs) / seconds))
    benchmark.measurement(batchLatencyP99, Int(report.batchLatencyP99Millis * 1000))
    try? FileManager.default.removeItem(atPath: out)
  }

  redisBenchmarks(traffic: traffic, lineEnds: lineEnds)

  Benchmark("StreamSaturated") { benchmark in
    try run(benchmark, passes: 3, linesPerSecond: nil)
  }

  Benchmark("StreamAt1MPairsPerSecond") { benchmark in
    // Eight passes: long enough (about 12 s at 100k users) for start and end not to count.
    try run(
      benchmark, passes: 8, linesPerSecond: Double(lineEnds.count) * 1_000_000 / Double(pairs))
  }
}
