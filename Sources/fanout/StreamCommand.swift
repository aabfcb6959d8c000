import ArgumentParser
import Dispatch
import FanoutEngine
import FanoutModel
import FanoutPipeline
import FanoutStream
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

extension Fanout {
  struct StreamCommand: ParsableCommand, HandlesSignals {
    static let configuration = CommandConfiguration(
      commandName: "stream",
      abstract: "Run as a pipeline stage: evaluate messages as they arrive, in micro-batches.",
      usage: """
        fanout stream --snapshot <file> --out <dir>|- [--listen <path>] [<options>]
        fanout stream --snapshot <file> --redis <url> --input <stream> --group <group> [<options>]
        """,
      discussion: """
        Reads NDJSON messages from standard input (or --listen), evaluates them in batches \
        against the snapshot in use and writes rotated segment files (or one NDJSON stream with \
        --out -). SIGHUP, or replacing the snapshot file, loads the new snapshot in the \
        background and swaps it in between batches. SIGTERM, SIGINT and the end of input finish \
        the lines already read, close every file and exit 0. A reload that waits --busy-timeout \
        for a writer keeps the snapshot in use.

        Exit codes: 0 stopped cleanly, 64 bad command line, output folder (in use by another \
        stage) or --metrics / --ready-file path, 65 first snapshot refused, 66 socket cannot be \
        set up, 71 out of memory for a ledger (rule 8's throttle, contract v3's \
        notifications), 73 output could not be written, 75 first snapshot busy. With --redis: 64 the \
        server refused the setup, 66 the input key is not a stream, 73 a batch could not be \
        applied (docs/stream.md).
        """)

    @Option(help: "The preferences snapshot (SQLite); reloaded on SIGHUP or when replaced.")
    var snapshot: String

    @Option(
      help: "A folder for the rotated segment files, or - for one NDJSON stream on standard output."
    )
    var out: String?

    @OptionGroup(title: "Redis") var redis: RedisCommandOptions

    @Option(
      help: "Read from this Unix domain socket (several producers) instead of standard input.")
    var listen: String?

    @Option(parsing: .unconditional, help: "A batch closes at this many input lines…")
    var batchMessages = 1_000

    @Option(
      parsing: .unconditional, help: "…or this many milliseconds after its first line arrived.")
    var batchMs = 50.0

    @Option(
      parsing: .unconditional, help: "Close a segment once one of its files reaches this many MB…")
    var rotateMb = 64.0

    @Option(parsing: .unconditional, help: "…or once it is this many seconds old.")
    var rotateSeconds = 60.0

    @OptionGroup var engine: EngineOptions

    @Option(
      help: """
        Rewrite this file with the metrics at every status interval: JSON, or Prometheus' \
        text format if the name ends in .prom (node_exporter's textfile collector).
        """)
    var metrics: String?

    @Option(help: "Log lines on standard error: text, or json (one object per line).")
    var logFormat = LogFormat.text

    @OptionGroup var indexCacheOptions: IndexCacheOptions

    @Option(
      parsing: .unconditional,
      help: """
        A longer input line is rejected (with its producer and line number) and skipped \
        to its line end.
        """)
    var maxLineBytes = 1 << 20

    @Option(
      help: """
        Write this file (holding the pid) once the stage is ready: snapshot loaded, \
        socket listening. Removed at exit.
        """)
    var readyFile: String?

    @Option(
      parsing: .unconditional,
      help:
        "Seconds between checks of the snapshot file for a replacement (SIGHUP reloads at once)."
    )
    var watchSeconds = 1.0

    @Option(parsing: .unconditional, help: "Seconds between status lines on standard error.")
    var statusSeconds = 10.0

    func validate() throws {
      if redis.url == nil {
        guard out != nil else { throw ValidationError("--out is required (or --redis).") }
      } else if out != nil || listen != nil {
        throw ValidationError("--redis reads and writes Redis streams: drop --out and --listen.")
      }
      if maxLineBytes < 1 { throw ValidationError("--max-line-bytes must be at least 1") }
      if batchMessages < 1 { throw ValidationError("--batch-messages must be at least 1") }
      // (The input queue holds four batches: a count past this would overflow it.)
      if batchMessages > 1_000_000 {
        throw ValidationError("--batch-messages must be at most 1000000")
      }
      // (Past 1e9 — 11 days of milliseconds, 31 years of seconds, a
      // petabyte — the conversions to durations and bytes would trap.)
      for (name, value) in [
        ("--batch-ms", batchMs), ("--rotate-mb", rotateMb), ("--rotate-seconds", rotateSeconds),
        ("--status-seconds", statusSeconds), ("--watch-seconds", watchSeconds),
      ] where !(value > 0 && value <= 1e9) {
        throw ValidationError("\(name) must be greater than 0 and at most 1000000000")
      }
    }

    func run() throws {
      var options = StreamOptions(
        snapshot: snapshot, input: listen.map { .socket(path: $0) } ?? .standardInput,
        destination: out == "-" ? .standardOutput : .directory(out ?? "-"))
      options.batchLines = batchMessages
      options.batchMilliseconds = batchMs
      options.rotateBytes = Int(rotateMb * 1_048_576)
      options.rotateSeconds = rotateSeconds
      options.threads = engine.workerThreads
      options.metricsPath = metrics
      options.logFormat = logFormat
      options.statusSeconds = statusSeconds
      options.watchSeconds = watchSeconds
      options.busyTimeoutMilliseconds = engine.busyTimeout
      options.indexCache = indexCacheOptions.cache
      options.maxLineBytes = maxLineBytes
      options.readyFile = readyFile
      do {
        _ = try options.runStage(redis: redis.options)
      } catch {
        guard logFormat == .json else { throw fail(error) }
        StreamLog(format: .json).event(
          "failed", "\(error)", level: .error, ["exit_status": .int(Int(error.exitStatus.rawValue))]
        )
        throw ExitCode(error.exitStatus.rawValue)
      }
    }
  }
}

/// `fanout stream`'s options for a Redis stream (docs/stream.md, "Redis").
struct RedisCommandOptions: ParsableArguments {
  @Option(
    name: .customLong("redis"),
    help: """
      Consume a Redis stream instead (redis://[user@]host[:port] or unix:///path, optional ?db=N; \
      password from FANOUT_REDIS_PASSWORD): docs/stream.md, "Redis".
      """)
  var url: String?

  @Option(help: "With --redis: the input stream (each entry's field 'message' is one line).")
  var input: String?

  @Option(help: "With --redis: the consumer group (created if missing).")
  var group: String?

  @Option(help: "With --redis: this consumer's name in the group (default: the host name).")
  var consumer: String?

  @Option(help: "With --redis: output streams PREFIX:<gateway>, PREFIX:rejected, PREFIX:batches.")
  var outPrefix = "fanout"

  @Flag(help: "With --redis: a new group starts at the beginning of the stream, not its end.")
  var fromStart = false

  @Option(
    parsing: .unconditional,
    help: "With --redis: take over entries other consumers left pending this many ms.")
  var claimIdleMs: Int?

  @Option(
    parsing: .unconditional, help: "With --redis: trim output streams to about N entries.")
  var maxLen: Int?

  func validate() throws {
    guard let url else {
      for (name, given) in [
        ("--input", input != nil), ("--group", group != nil), ("--consumer", consumer != nil),
        ("--claim-idle-ms", claimIdleMs != nil), ("--max-len", maxLen != nil),
        ("--from-start", fromStart),
      ] where given {
        throw ValidationError("\(name) goes with --redis.")
      }
      return
    }
    guard RedisAddress(url) != nil else {
      throw ValidationError(
        "--redis must be redis://[user@]host[:port][?db=N] (an IPv6 host in brackets) or unix:///path[?db=N]."
      )
    }
    guard let input, group != nil else {
      throw ValidationError("--redis needs --input STREAM and --group GROUP.")
    }
    // The stage's own streams are PREFIX:<gateway>, PREFIX:rejected and
    // PREFIX:batches: reading one would feed the stage its own output.
    if input.hasPrefix(outPrefix + ":") {
      throw ValidationError(
        "--input '\(Bounded.text(input))' is one of the stage's own output streams "
          + "(\(outPrefix):…): read the producers' stream, or give another --out-prefix")
    }
    if let claimIdleMs, claimIdleMs < 1 {
      throw ValidationError("--claim-idle-ms must be at least 1")
    }
    if let maxLen, maxLen < 1 { throw ValidationError("--max-len must be at least 1") }
  }

  /// What the stage is asked to do on Redis; nil without --redis.
  var options: RedisOptions? {
    guard let url, let address = RedisAddress(url), let input, let group else { return nil }
    var options = RedisOptions(
      address: address, password: getenv("FANOUT_REDIS_PASSWORD").map { String(cString: $0) },
      stream: input, group: group, consumer: consumer ?? Self.defaultConsumer,
      outPrefix: outPrefix)
    options.fromStart = fromStart
    options.claimIdleMilliseconds = claimIdleMs
    options.maxLength = maxLen
    return options
  }

  /// The host name: a stage restarted on the same host (or a pod keeping its
  /// name) is the same consumer, and re-reads the entries it left pending.
  /// Two live stages on one host need a `--consumer` each: sharing a name,
  /// one would re-read the other's batches in flight at its start.
  static var defaultConsumer: String {
    var name = [CChar](repeating: 0, count: 256)
    gethostname(&name, name.count - 1)
    return String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
  }
}

extension LogFormat: ExpressibleByArgument {}
