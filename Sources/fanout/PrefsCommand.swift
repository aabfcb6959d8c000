import ArgumentParser
import FanoutExplain
import FanoutMigration
import FanoutModel
import FanoutSnapshot
import FanoutTime
import FanoutTraffic

extension Fanout {
  struct PrefsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
      commandName: "prefs", abstract: "Read and change users' preferences in a snapshot.",
      subcommands: [Get.self, Apply.self])

    struct Apply: ParsableCommand {
      static let configuration = CommandConfiguration(
        abstract: "Apply preference changes written in a source system's request shapes.",
        discussion: """
          All or nothing: the changes are made in one transaction on a copy and the copy is \
          validated like any snapshot; then the same changes are made to the snapshot in place, \
          in one transaction begun before the copy (or the copy is written to --out). Readers, \
          in WAL mode or not, see the whole batch or none of it. See docs/migration.md \
          for each format. Exit codes: 0 applied, 64 bad command line, 65 \
          snapshot or a change refused (the entry is named), 66 changes unreadable, 73 result \
          not written, 75 snapshot busy (another writer held it past --busy-timeout).
          """)

      @Option(help: "The preferences snapshot (SQLite) to change.")
      var snapshot: String

      @Option(
        help:
          "The request shapes: \(SourceFormat.allCases.map(\.rawValue).joined(separator: ", ")).")
      var format: SourceFormat

      @Option(
        parsing: .unconditional,
        help: "Client-side use: entries are this user's (may omit the user; others refused).")
      var asUser: String?

      @Option(
        parsing: .unconditional,
        help:
          "When durations start (Easemob duration, TDLib mute_for): RFC 3339 or Unix ms. Default: now."
      )
      var now: String?

      @Option(help: "Write the result here instead of changing --snapshot in place.")
      var out: String?

      @Option(
        parsing: .unconditional,
        help: "Milliseconds to wait for another writer holding the snapshot; then exit 75.")
      var busyTimeout = SnapshotLoader.defaultBusyTimeoutMilliseconds

      @Argument(help: "The changes (JSON), or - for standard input.")
      var changes: String

      func validate() throws {
        if busyTimeout < 0 { throw ValidationError("--busy-timeout must be at least 0") }
        if let refusal = standardOutputRefusal("--out", out, kind: "file") {
          throw ValidationError(refusal)
        }
        // --out is written over: never over what is read.
        if let out, let file = FileIdentity(path: out) {
          if file == FileIdentity(path: snapshot) {
            throw ValidationError(
              "--out '\(out)' is the snapshot: omit --out to change it in place")
          }
          let read =
            changes == "-" ? FileIdentity(regularFileOpenAs: 0) : FileIdentity(path: changes)
          if file == read {
            throw ValidationError("--out '\(out)' is the changes file: name another file")
          }
        }
        if let now, Self.parseTime(now) == nil {
          throw ValidationError("--now '\(now)' is not an RFC 3339 time or Unix milliseconds")
        }
      }

      static func parseTime(_ text: String) -> Int64? {
        Int64(text) ?? RFC3339.parse(Array(text.utf8))
      }

      func run() throws {
        var options = ApplyOptions(
          snapshot: snapshot, format: format, asUser: asUser,
          now: now.flatMap(Self.parseTime) ?? WallClock.nowMillis(),
          changes: changes, out: out)
        options.busyTimeoutMilliseconds = busyTimeout
        let progress = ProgressBar.ifTerminal()
        options.step = progress?.show(step:)
        do {
          let report = try PrefsApply.run(options)
          progress?.clear()
          let rows = report.changedRows.map { "\($0.table) \($0.rows)" }.joined(separator: ", ")
          print(
            "applied \(report.entries) \(format) entries to \(report.path)"
              + (rows.isEmpty ? " (no row changed)" : "; rows changed: \(rows)"))
        } catch {
          progress?.clear()
          throw fail(error, status: error.exitStatus)
        }
      }
    }

    struct Get: ParsableCommand {
      static let configuration = CommandConfiguration(
        abstract: "A user's effective settings, and the level each came from.",
        discussion: """
          Without --channel, channels are listed where the user's own channel settings differ \
          from what they would inherit (or hold a snooze window); with --channel, the channels \
          named are shown whatever they hold. Exit codes: 0, 64 unknown user or channel, 65 \
          snapshot refused.
          """)

      @Option(help: "The preferences snapshot (SQLite).")
      var snapshot: String

      @Option(parsing: .unconditional, help: "The user id.")
      var user: String

      @Option(
        name: .customLong("channel"), parsing: .unconditionalSingleValue,
        help: "A channel to look at (repeatable).")
      var channels: [String] = []

      @Flag(help: "Write JSON instead of text.")
      var json = false

      @OptionGroup var indexCacheOptions: IndexCacheOptions

      func run() throws {
        do {
          let report = try PreferenceReport(
            snapshot: snapshot, user: user, channels: channels.isEmpty ? nil : channels,
            cache: indexCacheOptions.cache)
          print(
            json ? report.json().rendered() : Printable.text(report.text()),
            terminator: json ? "\n" : "")
        } catch {
          throw fail(error, status: error.exitStatus)
        }
      }
    }
  }
}

extension SourceFormat: ExpressibleByArgument {}
