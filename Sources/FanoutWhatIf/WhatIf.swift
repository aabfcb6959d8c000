import FanoutIndex
import FanoutKernel
import FanoutModel
import FanoutOutput
import FanoutPipeline
import FanoutSnapshot
import FanoutTraffic

#if canImport(Glibc)
  import Glibc
#endif

/// What `fanout whatif` is asked to do.
public struct WhatIfOptions: Sendable {
  /// What B is.
  public enum Scenario: Sendable {
    /// Another snapshot file.
    case snapshot(String)
    /// SQL statements applied to a private copy of A.
    case sql(String)
  }

  public var snapshot: String
  public var scenario: Scenario
  public var messages: String
  public var out: String
  public var threads: Int
  public var overwrite: Bool
  /// How long to wait for a writer holding a snapshot locked.
  public var busyTimeoutMilliseconds = SnapshotLoader.defaultBusyTimeoutMilliseconds
  /// Pushes per user per day above which a user counts as over budget.
  public var budget = WhatIfOptions.defaultBudget
  public static let defaultBudget = 20
  /// Where compiled snapshots are read from and added to (A and a named B;
  /// never a B made by `--sql`); nil for none.
  public var indexCache: IndexCache? = nil
  /// Called after each wave of messages with the fraction of the input read
  /// (nil when the input's size is unknown, as for standard input).
  public var progress: (@Sendable (_ messages: Int, _ fraction: Double?) -> Void)?

  public init(
    snapshot: String, scenario: Scenario, messages: String, out: String, threads: Int = 1,
    overwrite: Bool = false
  ) {
    self.snapshot = snapshot
    self.scenario = scenario
    self.messages = messages
    self.out = out
    self.threads = threads
    self.overwrite = overwrite
  }
}

/// Why a what-if run stopped, with its exit code.
public enum WhatIfError: Error, CustomStringConvertible {
  /// As for `fanout eval` (usage, snapshot A refused, input, output).
  case run(PipelineError)
  /// The scenario's SQL failed (64), or A could not be copied (73).
  case scenario(ScenarioError)
  /// Snapshot B (the file, or A with the SQL applied) was refused.
  case refusedB(SnapshotError, fromSQL: Bool)
  /// B does not have the same users, channels or categories as A.
  case incompatible(String)

  public var description: String {
    switch self {
    case .run(let e): e.description
    case .scenario(let e): e.description
    case .refusedB(let e, let fromSQL):
      (fromSQL ? "snapshot A with --sql applied: " : "snapshot B: ") + e.description
    case .incompatible(let reason): "snapshots A and B cannot be compared: \(reason)"
    }
  }

  public var exitStatus: ExitStatus {
    switch self {
    case .run(let e): e.exitStatus
    case .scenario(.sql), .scenario(.refused): .usage
    case .scenario(.copy): .cannotCreate
    case .refusedB(let e, _): e.exitStatus
    case .incompatible: .dataError
    }
  }
}

public enum WhatIf {
  /// Runs `fanout whatif`: loads both snapshots, evaluates the traffic against
  /// both in one pass, and writes the report files.
  public static func run(_ options: WhatIfOptions) throws(WhatIfError) -> WhatIfReport {
    let clock = ContinuousClock()
    let started = clock.now
    var phases: [(phase: String, seconds: Double)] = []
    var phaseStart = started
    func lap(_ phase: String) {
      let now = clock.now
      phases.append((phase, (now - phaseStart).seconds))
      phaseStart = now
    }
    let folder: OutputFolder
    do {
      folder = try OutputFolder(claiming: options.out, mode: .fresh(overwrite: options.overwrite))
    } catch { throw .run(error) }
    defer { folder.release() }
    let reader: LineReader
    do { reader = try LineReader(path: options.messages) } catch { throw .run(.input(error)) }

    // A scenario's copy of A is made while A loads: both only read A, in
    // read transactions of their own, and B, when it is an overlay, reads A
    // again; the watch, looked at once B is loaded, tells whether a commit
    // landed meanwhile, so that B is never made from another state than A.
    var watch: CommitWatch? = nil
    if case .sql = options.scenario {
      do { watch = try CommitWatch(path: options.snapshot) } catch {
        throw .run(.snapshot(error))
      }
    }
    let scenarioCopy: Pending<Result<ScenarioCopy, ScenarioError>>? =
      switch options.scenario {
      case .snapshot: nil
      case .sql(let sql):
        Pending {
          Result { () throws(ScenarioError) in try ScenarioCopy(of: options.snapshot, applying: sql)
          }
        }
      }
    let a: Index
    // A's rows, when A comes from SQLite, let an overlay B read only its own tables.
    var rowsOfA: SnapshotRows? = nil
    do {
      if scenarioCopy != nil {
        let loaded = try SnapshotLoader.loadKeepingRows(
          path: options.snapshot, busyTimeoutMilliseconds: options.busyTimeoutMilliseconds,
          cache: options.indexCache)
        (a, rowsOfA) = (loaded.snapshot.index, loaded.rows)
      } else {
        a = try SnapshotLoader.load(
          path: options.snapshot, busyTimeoutMilliseconds: options.busyTimeoutMilliseconds,
          cache: options.indexCache
        ).index
      }
    } catch {
      _ = scenarioCopy?.wait()  // so that the copy is removed before exiting
      throw .run(.snapshot(error))
    }
    lap("load A")
    var rowsChanged: [String: Int]? = nil
    let b = try loadB(
      options, copy: scenarioCopy, over: rowsOfA, a: a, rowsChanged: &rowsChanged, lap: lap)
    if let watch, watch.committedSince() {
      throw .run(
        .snapshot(
          SnapshotError(
            busy: options.snapshot,
            reason: "a writer committed to A while A and B were read for --sql, "
              + "so A and B would come from two states of the file; try again")))
    }
    try checkComparable(a, b)

    var totals = ComparisonTotals(a: a, b: b)
    /// A file operation, its error the run's.
    func writing<T>(_ body: () throws(OutputError) -> T) throws(WhatIfError) -> T {
      do { return try body() } catch { throw .run(.output(error)) }
    }
    let changes = try writing { () throws(OutputError) in
      try LZ4FrameFile(directory: options.out, name: "changes.ndjson.lz4")
    }
    let rejected = try writing { () throws(OutputError) in
      try PendingFile(directory: options.out, name: "rejected.ndjson")
    }
    let engine = EvaluationEngine(
      index: a, threads: options.threads, work: ChunkComparer(indexes: [a, b]))
    var firstRejection: Rejection?
    try engine.run(
      reader, groupSize: Pipeline.chunksInFlight,
      readFailed: { WhatIfError.run(.input($0)) },
      deliver: { chunks throws(WhatIfError) in
        for chunk in chunks {
          totals.add(chunk)
          try writing { () throws(OutputError) in try changes.append(blocks: chunk.changeBlocks) }
        }
      },
      waveDone: { batches throws(WhatIfError) in
        for batch in batches where !batch.rejections.isEmpty {
          totals.rejected += batch.rejections.count
          if firstRejection == nil { firstRejection = batch.rejections.first }
          try writing { () throws(OutputError) in
            try rejected.write(RejectedLines.json(batch.rejections))
          }
        }
        options.progress?(totals.messages, reader.fractionRead)
      })
    lap("evaluate and compare")
    let notifications = zip(engine.notificationCounters, engine.badges).map { counters, badges in
      counters.map { WhatIfReport.Notifications(counters: $0, badges: badges ?? .init()) }
    }
    var report = WhatIfReport(totals, a: a, b: b, options: options, notifications: notifications)
    report.sides[1].rowsChanged = rowsChanged?.sorted { $0.key < $1.key }.map { ($0.key, $0.value) }
    report.firstRejection = firstRejection
    report.linesRead = engine.linesRead
    try writing { () throws(OutputError) in
      try changes.close()
      try rejected.sync()
      let html = try PendingFile(directory: options.out, name: "report.html")
      try html.write(report.html())
      let json = try PendingFile(directory: options.out, name: "report.json")
      try json.write(report.json())
      // All or none; report.json last: its presence marks completion.
      try PendingFile.commit(together: [changes.file, rejected, html, json])
    }
    lap("report")
    report.phases = phases
    return report
  }

  /// Loads B: the `--against` file, or the scenario's copy of A once it is made.
  /// SQL that writes no table (`SELECT 1`, a comment, nothing) leaves B =
  /// A; `rowsChanged` is set to the rows the SQL changed per table.
  private static func loadB(
    _ options: WhatIfOptions, copy scenarioCopy: Pending<Result<ScenarioCopy, ScenarioError>>?,
    over rowsOfA: SnapshotRows?, a: Index, rowsChanged: inout [String: Int]?,
    lap: (String) -> Void
  ) throws(WhatIfError) -> Index {
    var copy: ScenarioCopy? = nil
    if let scenarioCopy {
      do { copy = try scenarioCopy.wait().get() } catch { throw .scenario(error) }
      lap("wait for the copy of A with the SQL applied")
      rowsChanged = copy!.rowsChanged
      if copy!.changesNothing { return a }
    }
    let path: String =
      switch options.scenario {
      case .snapshot(let file): file
      case .sql: copy!.path
      }
    defer { lap("load B") }
    let loaded: Snapshot
    do {
      loaded = try SnapshotLoader.load(
        path: path, base: copy?.base, over: rowsOfA,
        busyTimeoutMilliseconds: options.busyTimeoutMilliseconds,
        cache: copy == nil ? options.indexCache : nil)
    } catch {
      throw .refusedB(error, fromSQL: copy != nil)
    }
    withExtendedLifetime(copy) {}  // the copy's file is removed with it
    return loaded.index
  }

  /// B must have A's users, channels and categories, row for row, so that one
  /// parse of the traffic and one numbering of users serve both.
  static func checkComparable(_ a: Index, _ b: Index) throws(WhatIfError) {
    for (what, x, y) in [
      ("users", a.users, b.users), ("channels", a.channels, b.channels),
      ("categories", a.categories, b.categories),
    ]
    where !x.pool.sameStrings(as: y.pool) {
      let first = (0..<min(x.count, y.count)).first { !x.pool[$0].elementsEqual(y.pool[$0]) }
      let detail =
        if let first {
          "'\(x[first])' in A where B has '\(y[first])'"
        } else {
          "A has \(x.count), B has \(y.count)"
        }
      throw .incompatible("their \(what) differ (\(detail))")
    }
  }

}
