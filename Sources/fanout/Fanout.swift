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
      error, 71 out of memory for a ledger (rule 8's throttle, contract v3's \
      notifications), 73 output could not be written, 130/143/129 stopped by SIGINT/SIGTERM/SIGHUP, \
      75 snapshot busy (locked by a writer for longer than --busy-timeout: try again).
      """,
    version: fanoutVersion,
    subcommands: [
      Eval.self, WhatIfCommand.self, AuditCommand.self, StreamCommand.self, ExplainCommand.self,
      PrefsCommand.self,
      SnapshotCommand.self, MergeCommand.self, Gen.self,
    ])

  /// Blocks the termination signals before anything else happens (see
  /// `TerminationSignals`), then parses and runs the command.
  static func main() {
    TerminationSignals.blockAtStart()
    let arguments = Array(CommandLine.arguments.dropFirst())
    guard !arguments.isEmpty else {
      // Nothing asked: the commands, and a status a script can tell from success.
      var stderr = StandardError()
      print(helpMessage(), to: &stderr)
      Glibc.exit(ExitStatus.usage.rawValue)
    }
    if let k = firstArgumentNotUTF8() {
      // Swift would replace its bad bytes: a file name would name another
      // file, SQL or an id would silently say something else.
      var stderr = StandardError()
      print(
        "fanout: error: argument \(k) (\(Bounded.quoted(arguments[k - 1]))) is not UTF-8 text, "
          + "as every argument must be (file names, ids, SQL)", to: &stderr)
      Glibc.exit(ExitStatus.usage.rawValue)
    }
    do {
      var command = try parseAsRoot(arguments)
      if !(command is HandlesSignals) { TerminationSignals.endRunOnSignal() }
      try command.run()
    } catch {
      exitWithOneStyle(error)
    }
  }

  /// The position (1 for the first after the program's name) of the first
  /// command-line argument whose bytes are not UTF-8, if any.
  private static func firstArgumentNotUTF8() -> Int? {
    (1..<Int(CommandLine.argc)).first { k in
      guard let argument = CommandLine.unsafeArgv[k] else { return false }
      let bytes = UnsafeBufferPointer(start: argument, count: strlen(argument))
      return String(validating: bytes.lazy.map { UInt8(bitPattern: $0) }, as: UTF8.self) == nil
    }
  }

  /// Exits for `error` the way every error of Fanout's own is told:
  /// `fanout: error: …`, then for a bad command line the usage and where
  /// the help is. Help and --version print as usual; a command that already
  /// told its error (`ExitCode`) just exits.
  private static func exitWithOneStyle(_ error: any Error) -> Never {
    let code = exitCode(for: error)
    guard code != .success, !(error is ExitCode) else { exit(withError: error) }
    var lines = fullMessage(for: error).split(separator: "\n", omittingEmptySubsequences: false)
      .map(String.init)
    if let first = lines.first, first.hasPrefix("Error: ") {
      lines[0] = "fanout: error: " + first.dropFirst("Error: ".count)
    } else if !lines.isEmpty {
      lines[0] = "fanout: error: " + lines[0]
    }
    lines = lines.map { $0.hasPrefix("Usage: ") ? "usage: " + $0.dropFirst("Usage: ".count) : $0 }
    var stderr = StandardError()
    print(lines.joined(separator: "\n"), to: &stderr)
    Glibc.exit(code.rawValue)
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

/// Standard error, with the control characters of what is written shown as
/// `\u{1B}` (`Printable`): a message names files and values someone else
/// may have made — a file named with an escape sequence in a shared output
/// folder — and none of them may recolour or rewrite the terminal. The
/// progress line writes its own codes with `writeRaw`.
struct StandardError: TextOutputStream {
  mutating func write(_ string: String) { Self.writeRaw(Printable.text(string)) }

  static func writeRaw(_ string: String) {
    var bytes = Array(string.utf8)
    _ = bytes.withUnsafeMutableBytes { Glibc.write(2, $0.baseAddress, $0.count) }
  }
}

/// The number of cores the process may use.
func defaultThreadCount() -> Int { max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))) }
