import ArgumentParser
import FanoutEngine
import FanoutKernel
import FanoutModel
import FanoutPipeline
import FanoutTraffic

/// The options every command that evaluates traffic shares (`eval`,
/// `whatif`, `audit`, `stream`): the worker pool and how long a load waits
/// for a writer.
struct EngineOptions: ParsableArguments {
  @Option(parsing: .unconditional, help: "Worker threads (default: all cores; at most 1024).")
  var threads: Int?

  @Option(
    parsing: .unconditional,
    help: """
      Milliseconds to wait for a writer that holds the snapshot locked; then exit 75 (busy).
      """)
  var busyTimeout = Pipeline.defaultBusyTimeoutMilliseconds

  func validate() throws {
    try validateThreads(threads)
    if busyTimeout < 0 { throw ValidationError("--busy-timeout must be at least 0") }
  }

  var workerThreads: Int { threads ?? defaultThreadCount() }
}

/// The options every run into an output folder shares (`eval`, `whatif`, `audit`).
struct RunOptions: ParsableArguments {
  @OptionGroup var engine: EngineOptions

  @Flag(
    help: "Remove a previous run's files from the output folder first (never one this run reads).")
  var overwrite = false

  var workerThreads: Int { engine.workerThreads }
  var busyTimeout: Int { engine.busyTimeout }
}

/// The most worker threads a run takes: more only adds memory and contention.
let maxThreads = 1024

func validateThreads(_ threads: Int?) throws {
  guard let threads else { return }
  if threads < 1 { throw ValidationError("--threads must be at least 1") }
  if threads > maxThreads { throw ValidationError("--threads must be at most \(maxThreads)") }
}

/// Says on standard error what a run rejected (a nightly job's log shows
/// it even though the exit status is 0), and warns when nothing was evaluated.
func reportRejections(
  _ rejected: Int, first: Rejection?, linesRead: Int, messages: Int, folder: String
) {
  var stderr = StandardError()
  if let first {
    print(
      "fanout: \(rejected) of \(counted(linesRead, "traffic line")) rejected "
        + "(the first, line \(first.line): \(first.reason)); see \(folder)/rejected.ndjson",
      to: &stderr)
  }
  if messages == 0 {
    print("fanout: warning: no traffic line was evaluated", to: &stderr)
  }
}
