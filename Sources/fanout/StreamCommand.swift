import ArgumentParser
import Dispatch
import FanoutPipeline
import FanoutStream
import Synchronization

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

        Exit codes: 0 stopped cleanly, 64 bad command line, output folder (in use by another \
        stage) or --metrics / --ready-file path, 65 first snapshot refused, 66 socket cannot be \
        set up, 73 output could not be written, 75 first snapshot busy.
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

    @Option(parsing: .unconditional, help: "Worker threads (default: all cores).")
    var threads: Int?

    @Option(help: "Rewrite this file with the metrics, as JSON, at every status interval.")
    var metrics: String?

    @Option(
      parsing: .unconditional,
      help: """
        Milliseconds a (re)load waits for a writer that holds the snapshot locked; \
        the first load then exits 75 (busy), a reload keeps the snapshot in use.
        """)
    var busyTimeout = Pipeline.defaultBusyTimeoutMilliseconds

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
      try validateThreads(threads)
      if busyTimeout < 0 { throw ValidationError("--busy-timeout must be at least 0") }
      if maxLineBytes < 1 { throw ValidationError("--max-line-bytes must be at least 1") }
      if batchMessages < 1 { throw ValidationError("--batch-messages must be at least 1") }
      for (name, value) in [
        ("--batch-ms", batchMs), ("--rotate-mb", rotateMb), ("--rotate-seconds", rotateSeconds),
        ("--status-seconds", statusSeconds), ("--watch-seconds", watchSeconds),
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
      options.watchSeconds = watchSeconds
      options.busyTimeoutMilliseconds = busyTimeout
      options.maxLineBytes = maxLineBytes
      options.readyFile = readyFile
      // A consumer that goes away is an output error, not a silent death.
      signal(SIGPIPE, SIG_IGN)
      // Signals are handled from the start: one that arrives while the first
      // snapshot loads is kept and acted on once the stage exists.
      let control = StageControl()
      let signals = [
        (SIGTERM, { control.stop(because: "SIGTERM") }),
        (SIGINT, { control.stop(because: "SIGINT") }),
        (SIGHUP, { control.reload() }),
      ].map { number, action in
        signal(number, SIG_IGN)
        let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
        source.setEventHandler(handler: action)
        source.resume()
        return source
      }
      defer { for source in signals { source.cancel() } }
      do {
        let stage = try StreamStage(options)
        control.attach(stage)
        _ = try stage.run()
      } catch {
        throw fail(error)
      }
    }
  }
}

/// Forwards signals to the stage, keeping those that arrive before it exists.
final class StageControl: Sendable {
  private struct State {
    var stage: StreamStage?
    var stopReason: String?
    var reloadRequested = false
  }
  private let state = Mutex(State())

  func stop(because reason: String) {
    let stage = state.withLock { state -> StreamStage? in
      if state.stage == nil { state.stopReason = state.stopReason ?? reason }
      return state.stage
    }
    stage?.requestStop(because: reason)
  }

  func reload() {
    let stage = state.withLock { state -> StreamStage? in
      if state.stage == nil { state.reloadRequested = true }
      return state.stage
    }
    stage?.requestReload()
  }

  /// The stage is set up: what was asked meanwhile is done now.
  func attach(_ stage: StreamStage) {
    let (stopReason, reload) = state.withLock { state in
      state.stage = stage
      return (state.stopReason, state.reloadRequested)
    }
    if reload { stage.requestReload() }
    if let stopReason { stage.requestStop(because: stopReason + ", received while loading") }
  }
}
