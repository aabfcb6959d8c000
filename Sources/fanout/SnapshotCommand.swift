import ArgumentParser
import FanoutModel
import FanoutPipeline
import FanoutScaleOut
import FanoutSnapshot

extension Fanout {
  struct SnapshotCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
      commandName: "snapshot", abstract: "Inspect preference snapshots.",
      subcommands: [Check.self, Compile.self, Schema.self, Split.self])

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

      @OptionGroup var snapshot: SnapshotPath

      @OptionGroup var indexCacheOptions: IndexCacheOptions

      func run() throws {
        let path = snapshot.path
        let loaded: Snapshot
        do {
          loaded = try SnapshotLoader.load(path: path, cache: indexCacheOptions.cache)
        } catch { throw fail(.snapshot(error)) }
        let info = loaded.info
        print("snapshot \(path): valid")
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

    struct Compile: ParsableCommand {
      static let configuration = CommandConfiguration(
        abstract: "Validate a snapshot and compile its index, so that later loads read it back.",
        discussion: """
          Without --out the compiled index goes to the index cache, where every command that \
          loads this snapshot, unchanged, reads it instead of SQLite (docs/compiled-index.md). \
          With --out it is written to FILE, which eval, stream and whatif --against take in \
          place of the snapshot (this build of fanout only). Prints the file written. Exit codes: 0 \
          written, 65 snapshot refused (nothing is written), 73 the file could not be \
          written, 75 busy (locked by a writer, or still being written).
          """)

      @OptionGroup var snapshot: SnapshotPath

      @Option(help: ArgumentHelp("Write the compiled index to FILE.", valueName: "file"))
      var out: String?

      @OptionGroup var indexCacheOptions: IndexCacheOptions

      /// The compiled index is written over `--out`: never over the
      /// snapshot it is compiled from (a link to it included).
      func validate() throws {
        if let refusal = standardOutputRefusal("--out", out, kind: "file") {
          throw ValidationError(refusal)
        }
        if let out, let file = FileIdentity(path: out), file == FileIdentity(path: snapshot.path) {
          throw ValidationError(
            "--out '\(out)' is the snapshot itself: write the compiled index to another file")
        }
      }

      func run() throws {
        do {
          let written = try SnapshotLoader.compile(
            path: snapshot.path, output: out, cache: indexCacheOptions.cache)
          print(written)
        } catch {
          throw fail(error, status: error.exitStatus)
        }
      }
    }

    struct Split: ParsableCommand {
      static let configuration = CommandConfiguration(
        abstract: "Split a snapshot into recipient shards: DIR/shard-K-of-N.sqlite.",
        discussion: """
          A user's shard is pmod(xxhash64(user_id), N), as Spark SQL computes it: each shard \
          holds its users' rows, every channel (member_count filled in), category and setting \
          (docs/scale-out.md). Evaluate each with `fanout eval --mergeable`, then `fanout merge`. \
          Exit codes: 0 written, 64 bad command line or output folder (not empty without \
          --overwrite), 65 snapshot refused (nothing is written), 73 output could not be written \
          (nothing is left under a final name), 75 busy.
          """)

      @OptionGroup var snapshot: SnapshotPath

      @Option(parsing: .unconditional, help: "Number of shards (1 to 1024).")
      var shards: Int

      @Option(help: "The output folder: created if needed, must be empty unless --overwrite.")
      var out: String

      @Flag(
        help:
          "Remove a previous split's shard files from the output folder first (never the snapshot split)."
      )
      var overwrite = false

      func validate() throws {
        guard shards >= 1 else { throw ValidationError("--shards must be at least 1.") }
        // (A bound like --threads': Int.max crashed allocating per shard.)
        guard shards <= 1024 else { throw ValidationError("--shards must be at most 1024.") }
      }

      func run() throws {
        let clock = ContinuousClock()
        let started = clock.now
        let paths: [String]
        let progress = ProgressBar.ifTerminal(unit: "rows")
        do {
          paths = try SnapshotSplit.run(
            snapshot: snapshot.path, shards: shards, out: out, overwrite: overwrite,
            progress: progress?.update, step: progress?.show(step:))
        } catch {
          progress?.clear()
          throw fail(error)
        }
        progress?.clear()
        let seconds = (clock.now - started).seconds
        print("\(paths.count) shards of \(snapshot.path) in \(out) (\(threeDecimals(seconds)) s)")
      }
    }
  }
}

/// The snapshot a `snapshot` subcommand reads: an argument, or `--snapshot
/// FILE` as every other command takes it.
struct SnapshotPath: ParsableArguments {
  @Argument(help: "The snapshot (SQLite); or give --snapshot FILE.")
  var file: String?

  @Option(name: .customLong("snapshot"), help: "The snapshot (SQLite).")
  var option: String?

  func validate() throws {
    guard (file == nil) != (option == nil) else {
      throw ValidationError(
        file == nil ? "Missing the snapshot: FILE or --snapshot FILE." : "Give the snapshot once.")
    }
  }

  var path: String { option ?? file ?? "" }
}
