import ArgumentParser
import FanoutModel
import FanoutPipeline

#if canImport(Glibc)
  import Glibc
#endif

/// The `fanout` command: configuration only; the work is in the subcommands.
@main
struct Fanout: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "fanout",
    abstract: "Decide who gets a push notification for each chat message, in bulk.",
    discussion: """
      Exit codes: 0 success (rejected traffic lines do not change it), 64 bad command line or \
      output folder, 65 snapshot refused, 66 messages or snapshot file unreadable, 70 internal \
      error, 73 output could not be written, 130/143/129 stopped by SIGINT/SIGTERM/SIGHUP, \
      75 snapshot busy (locked by a writer for longer than --busy-timeout: try again).
      """,
    version: fanoutVersion,
    subcommands: [
      Eval.self, WhatIfCommand.self, StreamCommand.self, ExplainCommand.self, PrefsCommand.self,
      SnapshotCommand.self, MergeCommand.self, Gen.self,
    ])

  /// Blocks the termination signals before anything else happens (see
  /// `TerminationSignals`), then parses and runs the command.
  static func main() {
    TerminationSignals.blockAtStart()
    do {
      var command = try parseAsRoot(nil)
      if !(command is HandlesSignals) { TerminationSignals.endRunOnSignal() }
      try command.run()
    } catch {
      exit(withError: error)
    }
  }
}

/// A command that takes the termination signals itself (`TerminationSignals.handle`).
protocol HandlesSignals {}

/// Prints `error` on standard error and exits with its code.
func fail(_ error: PipelineError) -> ExitCode { fail(error, status: error.exitStatus) }

func fail(_ error: some Error & CustomStringConvertible, status: ExitStatus) -> ExitCode {
  var stderr = StandardError()
  print("fanout: error: \(error)", to: &stderr)
  return ExitCode(status.rawValue)
}

struct StandardError: TextOutputStream {
  mutating func write(_ string: String) {
    var bytes = Array(string.utf8)
    _ = bytes.withUnsafeMutableBytes { Glibc.write(2, $0.baseAddress, $0.count) }
  }
}

/// The number of cores the process may use.
func defaultThreadCount() -> Int { max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))) }

/// `fanout --version`: the program's version and the contract it implements.
let fanoutVersion = "fanout 1.3.0 (contract v2)"
