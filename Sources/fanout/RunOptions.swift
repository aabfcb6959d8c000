import ArgumentParser
import FanoutPipeline

/// The options every run over traffic shares (`eval`, `whatif`).
struct RunOptions: ParsableArguments {
  @Option(help: "Worker threads (default: all cores).")
  var threads: Int?

  @Flag(help: "Remove a previous run's files from the output folder first.")
  var overwrite = false

  @Option(
    help: """
      Milliseconds to wait for a writer that holds the snapshot locked; then exit 75 (busy).
      """)
  var busyTimeout = Pipeline.defaultBusyTimeoutMilliseconds

  func validate() throws {
    if let threads, threads < 1 { throw ValidationError("--threads must be at least 1") }
    if busyTimeout < 0 { throw ValidationError("--busy-timeout must be at least 0") }
  }

  var workerThreads: Int { threads ?? defaultThreadCount() }
}
