import ArgumentParser
import Dispatch
import FanoutPipeline
import FanoutStream

#if canImport(Glibc)
  import Glibc
#endif

extension Fanout {
  struct StreamCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
      commandName: "stream",
      abstract: "Run as a pipeline stage: evaluate messages as they arrive, in micro-batches.",
      discussion: """
        Reads NDJSON messages from standard input (or --listen), evaluates them in batches \
        against the snapshot in use and writes rotated segment files (or one NDJSON stream with \
        --out -). SIGHUP, or replacing the snapshot file, loads the new snapshot in the \
        background and swaps it in between batches. SIGTERM, SIGINT and the end of input finish \
        the lines already read, close every file and exit 0.
        """)

    @Option(help: "The preferences snapshot (SQLite); reloaded on SIGHUP or when replaced.")
    var snapshot: String

    @Option(
      help: "A folder for the rotated segment files, or - for one NDJSON stream on standard output."
    )
    var out: String

    @Option(
      help: "Read from this Unix domain socket (several producers) instead of standard input.")
    var listen: String?

    @Option(help: "A batch closes at this many input lines…")
    var batchMessages = 1_000

    @Option(help: "…or this many milliseconds after its first line arrived.")
    var batchMs = 50.0

    @Option(help: "Close a segment once one of its files reaches this many MB…")
    var rotateMb = 64.0

    @Option(help: "…or once it is this many seconds old.")
    var rotateSeconds = 60.0

    @Option(help: "Worker threads (default: all cores).")
    var threads: Int?

    @Option(help: "Rewrite this file with the metrics, as JSON, at every status interval.")
    var metrics: String?

    @Option(
      help: """
        Milliseconds a (re)load waits for a writer that holds the snapshot locked; \
        the first load then exits 75 (busy), a reload keeps the snapshot in use.
        """)
    var busyTimeout = Pipeline.defaultBusyTimeoutMilliseconds

    @Option(help: "Seconds between status lines on standard error.")
    var statusSeconds = 10.0

    func validate() throws {
      if let threads, threads < 1 { throw ValidationError("--threads must be at least 1") }
      if busyTimeout < 0 { throw ValidationError("--busy-timeout must be at least 0") }
      if batchMessages < 1 { throw ValidationError("--batch-messages must be at least 1") }
      for (name, value) in [
        ("--batch-ms", batchMs), ("--rotate-mb", rotateMb), ("--rotate-seconds", rotateSeconds),
        ("--status-seconds", statusSeconds),
      ] where !(value > 0) {
        throw ValidationError("\(name) must be greater than 0")
      }
    }

    func run() throws {
      var options = StreamOptions(
        snapshot: snapshot, input: listen.map { .socket(path: $0) } ?? .standardInput,
        destination: out == "-" ? .standardOutput : .directory(out))
      options.batchLines = batchMessages
      options.batchMilliseconds = batchMs
      options.rotateBytes = Int(rotateMb * 1_048_576)
      options.rotateSeconds = rotateSeconds
      options.threads = threads ?? defaultThreadCount()
      options.metricsPath = metrics
      options.statusSeconds = statusSeconds
      options.busyTimeoutMilliseconds = busyTimeout
      // A consumer that goes away is an output error, not a silent death.
      signal(SIGPIPE, SIG_IGN)
      do {
        let stage = try StreamStage(options)
        let signals = [
          (SIGTERM, { stage.requestStop(because: "SIGTERM") }),
          (SIGINT, { stage.requestStop(because: "SIGINT") }),
          (SIGHUP, { stage.requestReload() }),
        ].map { number, action in
          signal(number, SIG_IGN)
          let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
          source.setEventHandler(handler: action)
          source.resume()
          return source
        }
        _ = try stage.run()
        for source in signals { source.cancel() }
      } catch {
        throw fail(error)
      }
    }
  }
}
