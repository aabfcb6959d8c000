// The Redis stage against the server's own limit (docs/performance.md):
// - RedisStage: `fanout stream --redis` draining an input stream that
//   already holds the traffic's first lines (so every batch is full:
//   --batch-messages entries), into a private redis-server with its
//   append-only file on (appendfsync everysec).
// - RedisReplay-limit: the same server, fresh, given only the stage's
//   output entries — the same XADDs in the same MULTI/EXEC blocks, one per
//   batch — with `redis-cli --pipe`: what the server alone needs for the
//   stage's output. The stage's reads (XREADGROUP) and acknowledgements
//   (XACK) are server work the replay does not have.
// Their ratio (replay time / stage time) is the share of the server's limit
// the stage reaches.
import Benchmark
import FanoutStream
import Foundation
import Synchronization

/// The traffic lines the Redis benchmarks feed (fewer when the traffic has fewer).
let redisLines = 100_000

/// A redis-server of the benchmark's own on a Unix socket in a temporary
/// folder, stopped and removed with `stop()`.
final class PrivateRedis {
  let folder: String
  let socket: String
  private let server: Process

  init() throws {
    folder =
      NSTemporaryDirectory() + "/fanout-bench-redis-\(getpid())-\(UUID().uuidString.prefix(8))"
    try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
    socket = folder + "/redis.sock"
    server = Process()
    server.executableURL = URL(fileURLWithPath: try Self.tool("redis-server"))
    server.arguments = [
      "--port", "0", "--unixsocket", socket, "--unixsocketperm", "700", "--dir", folder,
      "--appendonly", "yes", "--appendfsync", "everysec", "--save", "", "--daemonize", "no",
    ]
    server.standardOutput = FileHandle.nullDevice
    try server.run()
    for _ in 0..<500 where (try? cli(["PING"])) != "PONG" { usleep(10_000) }
  }

  /// Runs `redis-cli` on this server; its standard output, trimmed.
  @discardableResult
  func cli(_ arguments: [String], input: String? = nil) throws -> String {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: try Self.tool("redis-cli"))
    process.arguments = ["-s", socket] + arguments
    let output = Pipe()
    process.standardOutput = output
    process.standardError = FileHandle.nullDevice
    if let input { process.standardInput = FileHandle(forReadingAtPath: input) }
    try process.run()
    let data = output.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
  }

  /// By SHUTDOWN, not a signal: the benchmark's children inherit its
  /// blocked termination signals.
  func stop() {
    _ = try? cli(["SHUTDOWN", "NOSAVE"])
    if server.isRunning { kill(server.processIdentifier, SIGKILL) }
    server.waitUntilExit()
    try? FileManager.default.removeItem(atPath: folder)
  }

  static func tool(_ name: String) throws -> String {
    for directory in ["/usr/bin", "/usr/local/bin", "/usr/sbin"]
    where FileManager.default.isExecutableFile(atPath: directory + "/" + name) {
      return directory + "/" + name
    }
    throw CocoaError(.fileNoSuchFile, userInfo: [NSFilePathErrorKey: name])
  }
}

/// Redis protocol commands, appended to a file for `redis-cli --pipe`.
struct RESPFile {
  private(set) var bytes: [UInt8] = []

  mutating func command(_ arguments: [[UInt8]]) {
    bytes += Array("*\(arguments.count)\r\n".utf8)
    for argument in arguments {
      bytes += Array("$\(argument.count)\r\n".utf8)
      bytes += argument
      bytes += [0x0D, 0x0A]
    }
  }

  func write(to path: String) {
    FileManager.default.createFile(atPath: path, contents: Data(bytes))
  }
}

/// The stage's output, read back: per batch, the XADDs it made (key and
/// field-value pairs), in the order they were made.
struct StageOutput {
  var batches: [[(key: String, fields: [[UInt8]])]] = []
  var entries: Int { batches.reduce(0) { $0 + $1.count } }

  /// Reads every `prefix:*` stream; an output entry belongs to the batch
  /// of its input entry (`entry` field), the input having been read in full
  /// batches of `batchLines` entries in id order.
  init(_ redis: PrivateRedis, input: String, prefix: String, batchLines: Int) throws {
    let inputIDs = try redis.cli(["--raw", "XRANGE", input, "-", "+"])
      .split(separator: "\n", omittingEmptySubsequences: false)
    var position: [Substring: Int] = [:]
    var i = 0
    while i + 2 < inputIDs.count + 1 {  // id, "message", line
      position[inputIDs[i]] = position.count
      i += 3
    }
    batches = Array(repeating: [], count: (position.count + batchLines - 1) / batchLines)
    let keys = try redis.cli(["--raw", "KEYS", prefix + ":*"]).split(separator: "\n").map(
      String.init
    ).sorted()
    var records: [[UInt8]] = []
    for key in keys {
      let lines = try redis.cli(["--raw", "XRANGE", key, "-", "+"])
        .split(separator: "\n", omittingEmptySubsequences: false)
      let fieldsPerEntry = key == prefix + ":batches" ? 2 : 4
      var j = 0
      while j + fieldsPerEntry < lines.count + 1 {
        let fields = lines[(j + 1)...(j + fieldsPerEntry)].map { Array($0.utf8) }
        if key == prefix + ":batches" {
          records.append(fields[1])
        } else {
          let entry = fields.count == 4 && fields[0] == Array("entry".utf8) ? fields[1] : fields[3]
          batches[position[Substring(String(decoding: entry, as: UTF8.self))]! / batchLines]
            .append((key, fields))
        }
        j += 1 + fieldsPerEntry
      }
    }
    for (b, record) in records.enumerated() where b < batches.count {
      batches[b].append((prefix + ":batches", [Array("batch".utf8), record]))
    }
  }

  /// The replay: per batch, MULTI, its XADDs, EXEC.
  var replay: RESPFile {
    var file = RESPFile()
    for batch in batches {
      file.command([Array("MULTI".utf8)])
      for (key, fields) in batch {
        file.command([Array("XADD".utf8), Array(key.utf8), Array("*".utf8)] + fields)
      }
      file.command([Array("EXEC".utf8)])
    }
    return file
  }
}

func redisBenchmarks(traffic: [UInt8], lineEnds: [Int]) {
  guard (try? PrivateRedis.tool("redis-server")) != nil else { return }
  let lines = min(redisLines, lineEnds.count)
  let batchLines = StreamOptions(
    snapshot: "", input: .standardInput, destination: .standardOutput
  ).batchLines
  let inputFile = NSTemporaryDirectory() + "/fanout-bench-redis-input.resp"
  do {
    var input = RESPFile()
    var start = 0
    for end in lineEnds.prefix(lines) {
      input.command([
        Array("XADD".utf8), Array("traffic".utf8), Array("*".utf8), Array("message".utf8),
        Array(traffic[start..<(end - 1)]),
      ])
      start = end
    }
    input.write(to: inputFile)
  }

  /// Runs the stage on `redis` until it has committed every input batch
  /// (measured from its start to the stop that follows); returns the
  /// seconds to the last batch and the pairs evaluated.
  func drain(_ redis: PrivateRedis, measuring benchmark: Benchmark? = nil) throws -> (
    seconds: Double, pairs: Int
  ) {
    try redis.cli(["--pipe"], input: inputFile)
    var options = StreamOptions(
      snapshot: BenchmarkData.snapshot, input: .standardInput, destination: .standardOutput)
    options.threads = 2
    options.statusSeconds = 3600
    var bus = RedisOptions(
      address: RedisAddress("unix://" + redis.socket)!, password: nil, stream: "traffic",
      group: "fanout", consumer: "bench", outPrefix: "fanout")
    bus.fromStart = true
    let stage = try options.makeStage(redis: bus)  // loads the snapshot: not measured
    let batches = (lines + batchLines - 1) / batchLines
    let started = ContinuousClock.now
    let finished = Mutex<ContinuousClock.Instant?>(nil)
    // One redis-cli asking XLEN every 10 ms: the last batch record is out.
    let watch = Process()
    watch.executableURL = URL(fileURLWithPath: try PrivateRedis.tool("redis-cli"))
    watch.arguments = ["-s", redis.socket, "-r", "-1", "-i", "0.01", "XLEN", "fanout:batches"]
    let counts = Pipe()
    watch.standardOutput = counts
    try watch.run()
    let watcher = Thread {
      var pending: [UInt8] = []
      reading: while true {
        let data = counts.fileHandleForReading.availableData
        if data.isEmpty { break }
        pending += data
        while let end = pending.firstIndex(of: 0x0A) {
          let count = Int(String(decoding: pending[..<end], as: UTF8.self)) ?? 0
          pending.removeSubrange(...end)
          if count >= batches { break reading }
        }
      }
      finished.withLock { $0 = .now }
      kill(watch.processIdentifier, SIGKILL)  // (its termination signals are blocked)
      stage.requestStop(because: "drained")
    }
    watcher.start()
    benchmark?.startMeasurement()
    let report = try stage.run()
    benchmark?.stopMeasurement()
    let d = (finished.withLock { $0 }! - started).components
    return (Double(d.seconds) + Double(d.attoseconds) * 1e-18, report.pairs)
  }

  let configuration = Benchmark.Configuration(
    metrics: [.wallClock, pairsPerSecond], maxDuration: .seconds(60), maxIterations: 3,
    thresholds: tolerances)

  Benchmark("RedisStage", configuration: configuration) { benchmark in
    let redis = try PrivateRedis()
    defer { redis.stop() }
    let (seconds, pairs) = try drain(redis, measuring: benchmark)
    benchmark.measurement(pairsPerSecond, Int(Double(pairs) / seconds))
  }

  /// The replay of the stage's output, made on first use by a run of the stage.
  let replayFile = NSTemporaryDirectory() + "/fanout-bench-redis-replay.resp"
  var batchCount: Int?
  func makeReplay() throws -> Int {
    if let batchCount { return batchCount }
    let source = try PrivateRedis()
    defer { source.stop() }
    _ = try drain(source)
    let output = try StageOutput(
      source, input: "traffic", prefix: "fanout", batchLines: batchLines)
    output.replay.write(to: replayFile)
    batchCount = output.batches.count
    return output.batches.count
  }

  Benchmark(
    "RedisReplay-limit",
    configuration: .init(metrics: [.wallClock], maxIterations: 3, thresholds: tolerances)
  ) { benchmark in
    let batches = try makeReplay()
    let redis = try PrivateRedis()
    defer { redis.stop() }
    benchmark.startMeasurement()
    try redis.cli(["--pipe"], input: replayFile)
    benchmark.stopMeasurement()
    let written = try redis.cli(["XLEN", "fanout:batches"])
    precondition(Int(written) == batches, "the replay left \(written) of \(batches) batch records")
  }
}
