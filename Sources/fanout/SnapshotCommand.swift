import ArgumentParser
import FanoutPipeline
import FanoutSnapshot

extension Fanout {
  struct SnapshotCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
      commandName: "snapshot", abstract: "Inspect preference snapshots.",
      subcommands: [Check.self, Schema.self])

    struct Schema: ParsableCommand {
      static let configuration = CommandConfiguration(
        abstract: "Print the SQL that creates an empty snapshot.",
        discussion: "Example: fanout snapshot schema | cat - prefs.sql | sqlite3 snapshot.sqlite")

      func run() { print(SnapshotSchema.createSQL, terminator: "") }
    }

    struct Check: ParsableCommand {
      static let configuration = CommandConfiguration(
        abstract: "Validate a snapshot and print what it holds, or why it is refused.",
        discussion: "Exit codes: 0 valid, 65 refused (table, row key and column named), 75 busy.")

      @Argument(help: "The snapshot (SQLite).")
      var file: String

      func run() throws {
        let snapshot: Snapshot
        do { snapshot = try SnapshotLoader.load(path: file) } catch { throw fail(.snapshot(error)) }
        let info = snapshot.info
        print("snapshot \(file): valid")
        print("rows:")
        for (table, rows) in info.rowCounts { print("  \(table): \(rows)") }
        print("time zones (\(info.timeZones.count)): \(info.timeZones.joined(separator: ", "))")
        print("devices per gateway:")
        for (gateway, devices) in info.devicesPerGateway { print("  \(gateway): \(devices)") }
        print(
          "distinct DND schedules: \(info.dndPatterns); distinct snooze groups: \(info.snoozeGroups)"
        )
      }
    }
  }
}
