import ArgumentParser
import FanoutGenerator
import FanoutModel
import FanoutPipeline

#if canImport(Glibc)
  import Glibc
#endif

extension Profile: ExpressibleByArgument {}

extension Fanout {
  struct Gen: ParsableCommand {
    static let configuration = CommandConfiguration(
      abstract: "Generate a synthetic snapshot and a day of traffic (deterministic for a seed).",
      discussion: "Exit codes: 0 written, 64 bad command line, 73 the files could not be written.")

    @Option(parsing: .unconditional, help: "Number of users.")
    var users: Int

    @Option(parsing: .unconditional, help: "Number of messages in the traffic.")
    var messages: Int

    @Option(help: "Random seed: the same options give the same files.")
    var seed: UInt64 = 1

    @Option(
      help: "chat (mostly direct and group traffic) or broadcast (mostly 10k–100k member channels)."
    )
    var profile: Profile = .chat

    @Option(help: "Output folder for snapshot.sqlite and traffic.ndjson.")
    var out: String

    @Flag(
      help:
        "Contract v2 data too: per-kind and large-channel defaults, an @all limit, muted users, thread levels, silent and threaded messages."
    )
    var v2 = false

    func validate() throws {
      if users < 2 { throw ValidationError("--users must be at least 2") }
      if messages < 0 { throw ValidationError("--messages must not be negative") }
    }

    func run() throws {
      var st = stat()
      if stat(out, &st) == 0 && (st.st_mode & S_IFMT) != S_IFDIR {
        throw fail(.usage("--out '\(out)' exists and is not a folder"))
      }
      let clock = ContinuousClock()
      let start = clock.now
      let report: GeneratorReport
      let bar = ProgressBar.ifTerminal(unit: "rows")
      do {
        report = try Generator.run(
          GeneratorOptions(
            users: users, messages: messages, seed: seed, profile: profile, out: out, v2: v2),
          progress: bar.map { bar in
            { rows, fraction in bar.update(messages: rows, fraction: fraction) }
          }
        )
        bar?.clear()
      } catch {
        bar?.clear()
        throw fail(GenerationError(reason: "\(error)"), status: .cannotCreate)
      }
      print(
        "\(report.users) users, \(report.channels) channels, \(report.memberships) memberships, "
          + "\(report.devices) devices, \(report.channelPrefs) channel overrides; \(report.messages) messages, "
          + "\(report.pairs) pairs; in \(clock.now - start)")
      print("snapshot: \(report.snapshotPath)\ntraffic:  \(report.trafficPath)")
    }
  }
}

/// Why `fanout gen` could not write its files.
struct GenerationError: Error, CustomStringConvertible {
  let reason: String
  var description: String { reason }
}
