// Parse, evaluate and write, against a roofline loop that only reads each
// pair's member id and one 8-byte state word per user from flat arrays.
import Benchmark
import FanoutEngine
import FanoutIndex
import FanoutKernel
import FanoutOutput
import FanoutPipeline
import FanoutSnapshot
import FanoutTraffic
import Foundation

/// Pairs per second, computed from the pairs of one iteration and its duration.
let pairsPerSecond = BenchmarkMetric.custom(
  "pairs/s", polarity: .prefersLarger, useScalingFactor: false)
/// Traffic parsed per second and per worker thread, in MB (10^6 bytes).
let parseRate = BenchmarkMetric.custom(
  "MB/s per core", polarity: .prefersLarger, useScalingFactor: false)

let benchmarks: @Sendable () -> Void = {
  BenchmarkData.ensure()
  let threads = 2
  let index = try! SnapshotLoader.load(path: BenchmarkData.snapshot).index
  let reader = try! LineReader(path: BenchmarkData.traffic)
  let block = try! reader.next(maxLines: Int.max)!
  let batches = Engine.parse(block, index: index, workers: threads)
  // Counting as `fanout eval --summary-only` does: large channels through their shares.
  let countingPlan = Engine.planChunks(batches, index: index, sharedCounting: true)
  let pairs = batches.reduce(0) { total, batch in
    total + (0..<batch.count).reduce(0) { $0 + index.members(of: batch.channel[$1]).count }
  }
  // The roofline's inputs: per pair a member id (the member lists), per user one word.
  let state = (0..<index.users.count).map { UInt64($0) &* 0x9E37_79B9_7F4A_7C15 }
  let channelOfMessage = batches.flatMap(\.channel)

  Benchmark.defaultConfiguration = .init(
    metrics: [
      .wallClock, .cpuTotal, .throughput, .peakMemoryResident, .mallocCountTotal, pairsPerSecond,
      parseRate,
    ],
    maxDuration: .seconds(10), maxIterations: 20,
    thresholds: tolerances)

  func record(_ benchmark: Benchmark, since start: ContinuousClock.Instant, passes: Int = 1) {
    let d = (ContinuousClock.now - start).components
    let seconds = Double(d.seconds) + Double(d.attoseconds) * 1e-18
    benchmark.measurement(pairsPerSecond, Int(Double(pairs * passes) / seconds))
  }

  let trafficBytes = block.bytes.count
  Benchmark("TrafficParse") { benchmark in
    let start = ContinuousClock.now
    blackHole(Engine.parse(block, index: index, workers: threads).count)
    let d = (ContinuousClock.now - start).components
    let seconds = Double(d.seconds) + Double(d.attoseconds) * 1e-18
    benchmark.measurement(parseRate, Int(Double(trafficBytes) / seconds / Double(threads) / 1e6))
  }

  Benchmark("EvaluateDecisionsOnly") { benchmark in
    let start = ContinuousClock.now
    var evaluators = (0..<threads).map { _ in Evaluator(index: index, output: .counts) }
    let results = runChunks(
      count: countingPlan.count, workers: &evaluators, empty: 0,
      chunk: { evaluator, i in
        var result = ChunkResult(gateways: index.gateways.count)
        let chunk = countingPlan[i]
        evaluator.evaluate(batches[chunk.batch], messages: chunk.messages, into: &result)
        return result.counters.delivered
      })
    record(benchmark, since: start)
    blackHole(results)
  }

  // Ten passes an iteration, so that thread start-up does not dominate a few milliseconds.
  let rooflinePasses = 10
  // A limit is a reference, not product behaviour: its times (a few
  // milliseconds, very noisy here) never gate. Its few dozen mallocs are
  // Dispatch's own and vary run to run.
  var rooflineTolerances = tolerances.mapValues { _ in BenchmarkThresholds(relative: [.p90: 1000]) }
  rooflineTolerances[.mallocCountTotal] = .init(absolute: [.p90: 50])
  Benchmark("Roofline-limit", configuration: .init(thresholds: rooflineTolerances)) { benchmark in
    let start = ContinuousClock.now
    let chunk = 4096
    let chunks = (channelOfMessage.count + chunk - 1) / chunk
    let sums = runChunks(count: chunks * rooflinePasses, workers: threads, empty: UInt64(0)) {
      pass in
      let c = pass % chunks
      return index.memberUser.withUnsafeBufferPointer { members in
        index.channelMembers.withUnsafeBufferPointer { offsets in
          state.withUnsafeBufferPointer { state in
            var sum: UInt64 = 0
            for m in (c * chunk)..<min((c + 1) * chunk, channelOfMessage.count) {
              let ch = Int(channelOfMessage[m])
              for slot in offsets[ch]..<offsets[ch + 1] { sum &+= state[Int(members[slot])] }
            }
            return sum
          }
        }
      }
    }
    record(benchmark, since: start, passes: rooflinePasses)
    blackHole(sums)
  }

  // The other half of the end-to-end floor (with LoadBenchmarks' raw SQLite
  // scan): compressing one run's own delivery lines on one core as `eval`
  // does (acceleration 4: a fifth faster than `lz4 -1`, so the floor is the
  // stricter for it). A reference: its times never gate.
  let run = NSTemporaryDirectory() + "/fanout-bench-lz4-limit"
  var deliveryBytes: [[UInt8]] = []
  var lz4Tolerances = tolerances.mapValues { _ in BenchmarkThresholds(relative: [.p90: 1000]) }
  lz4Tolerances[.mallocCountTotal] = .init(absolute: [.p90: 50])
  Benchmark(
    "LZ4-limit",
    configuration: .init(
      thresholds: lz4Tolerances,
      setup: {
        _ = try Pipeline.eval(
          EvalOptions(
            snapshot: BenchmarkData.snapshot, messages: BenchmarkData.traffic, out: run,
            threads: threads, overwrite: true))
        deliveryBytes = try FileManager.default.contentsOfDirectory(atPath: run)
          .filter { $0.hasSuffix(".ndjson.lz4") }.sorted().map { name in
            let reader = try LZ4LineReader(path: run + "/" + name)
            var bytes: [UInt8] = []
            while let line = try reader.nextLine() {
              bytes += line
              bytes.append(UInt8(ascii: "\n"))
            }
            return bytes
          }
      })
  ) { benchmark in
    for bytes in deliveryBytes { blackHole(LZ4Frame.blocks(bytes).count) }
  }

  // Contract v3: the same traffic (10% read lines) with notification groups
  // on and off; the target is on ≤ 1.25 × off.
  BenchmarkData.ensureV3()
  for (name, snapshot) in [
    ("EvaluateAndWrite-v3-groups-on", BenchmarkData.v3Snapshot),
    ("EvaluateAndWrite-v3-groups-off", BenchmarkData.v3SnapshotGroupsOff),
  ] {
    Benchmark(name, configuration: .init(maxIterations: 5)) { benchmark in
      let out = NSTemporaryDirectory() + "/fanout-bench-out-v3"
      var options = EvalOptions(
        snapshot: snapshot, messages: BenchmarkData.v3Traffic, out: out, threads: threads,
        overwrite: true)
      options.indexCache = nil
      blackHole(try Pipeline.eval(options).counters.delivered)
    }
  }

  Benchmark("EvaluateAndWrite", configuration: .init(maxIterations: 5)) { benchmark in
    let out = NSTemporaryDirectory() + "/fanout-bench-out"
    let start = ContinuousClock.now
    let report = try Pipeline.eval(
      EvalOptions(
        snapshot: BenchmarkData.snapshot, messages: BenchmarkData.traffic, out: out,
        threads: threads, overwrite: true))
    record(benchmark, since: start)
    blackHole(report.counters.delivered)
  }
}
