import ArgumentParser
import FanoutExplain

extension Fanout {
  struct PrefsCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
      commandName: "prefs", abstract: "Read and change users' preferences in a snapshot.",
      subcommands: [Get.self])

    struct Get: ParsableCommand {
      static let configuration = CommandConfiguration(
        abstract: "A user's effective settings, and the level each came from.",
        discussion: """
          Channels are listed only where the user's own channel settings differ from what they \
          would inherit (or hold a snooze window): all such channels, or only those among \
          --channel. Exit codes: 0, 64 unknown user or channel, 65 snapshot refused.
          """)

      @Option(help: "The preferences snapshot (SQLite).")
      var snapshot: String

      @Option(help: "The user id.")
      var user: String

      @Option(name: .customLong("channel"), help: "A channel to look at (repeatable).")
      var channels: [String] = []

      @Flag(help: "Write JSON instead of text.")
      var json = false

      func run() throws {
        do {
          let report = try PreferenceReport(
            snapshot: snapshot, user: user, channels: channels.isEmpty ? nil : channels)
          print(json ? report.json().rendered() : report.text(), terminator: json ? "\n" : "")
        } catch {
          throw fail(error, exitCode: error.exitCode)
        }
      }
    }
  }
}
