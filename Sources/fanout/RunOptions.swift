import ArgumentParser

/// The options every run over traffic shares (`eval`, `whatif`).
struct RunOptions: ParsableArguments {
  @Option(help: "Worker threads (default: all cores).")
  var threads: Int?

  @Flag(help: "Remove a previous run's files from the output folder first.")
  var overwrite = false

  func validate() throws {
    if let threads, threads < 1 { throw ValidationError("--threads must be at least 1") }
  }

  var workerThreads: Int { threads ?? defaultThreadCount() }
}
