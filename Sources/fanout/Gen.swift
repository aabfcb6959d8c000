import ArgumentParser
import FanoutGenerator
import FanoutModel
import FanoutOutput
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

    @Option(parsing: .unconditional, help: "Random seed: the same options give the same files.")
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

    @Flag(
      help:
        "Contract v3 data too (and v2's): notification groups with caps, and read lines (about 10% of the lines)."
    )
    var v3 = false

    @Flag(help: "Replace the snapshot.sqlite and traffic.ndjson of a previous gen in --out.")
    var overwrite = false

    func validate() throws {
      if let problem = Generator.problem(users: users, messages: messages) {
        throw ValidationError(problem)
      }
    }

    func run() throws {
      let clock = ContinuousClock()
      let start = clock.now
      let names = ["snapshot.sqlite", "traffic.ndjson"]
      // Like every writing command: the folder locked, empty unless
      // --overwrite (which replaces only gen's own files), both files
      // written aside and renamed together once complete.
      let folder: OutputFolder
      let files: [PendingFile]
      do {
        folder = try OutputFolder(
          claiming: out,
          mode: .fresh(
            overwrite: overwrite,
            outputs: { names.contains($0) || OutputFolder.isPartial($0, of: names.contains) }))
      } catch { throw fail(error) }
      defer { folder.release() }
      do {
        files = try names.map { name throws(OutputError) in
          try PendingFile(directory: out, name: name)
        }
      } catch { throw fail(.output(error)) }
      var options = GeneratorOptions(
        users: users, messages: messages, seed: seed, profile: profile, out: out, v2: v2)
      options.v3 = v3
      options.snapshotPath = files[0].partialPath
      options.trafficPath = files[1].partialPath
      let report: GeneratorReport
      let bar = ProgressBar.ifTerminal(unit: "rows")
      do {
        report = try Generator.run(
          options,
          progress: bar.map { bar in
            // The generator's shares of the work: users, then channels and
            // members, then traffic (Generator.run); each counts from 0.
            var step = ""
            return { rows, fraction in
              let now =
                fraction < 0.3 ? "users" : fraction < 0.7 ? "channels and members" : "traffic"
              if now != step {
                step = now
                bar.show(step: now)
              }
              bar.update(messages: rows, fraction: fraction)
            }
          }
        )
        try PendingFile.commit(together: files)
        bar?.clear()
      } catch {
        bar?.clear()
        // Removed now, so that the folder's release finds it as it was.
        for file in files { file.discard() }
        throw fail(GeneratorError(description: "\(error)"), status: .cannotCreate)
      }
      print(
        "\(report.users) users, \(report.channels) channels, \(report.memberships) memberships, "
          + "\(report.devices) devices, \(report.channelPrefs) channel overrides; \(report.messages) messages, "
          + "\(report.pairs) pairs; in \(threeDecimals((clock.now - start).seconds)) s")
      print("snapshot: \(out)/\(names[0])\ntraffic:  \(out)/\(names[1])")
    }
  }
}
