import Dispatch
import FanoutEngine
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

  /// One variant of a sweep: its name (in file names and the report) and
  /// its SQL, applied to a private copy of A.
  public struct Variant: Sendable {
    public var name: String
    public var sql: String

    public init(name: String, sql: String) {
      self.name = name
      self.sql = sql
    }
  }

  /// Sweeps take from 2 to this many variants.
  public static let maxVariants = 16

  public var snapshot: String
  public var scenario: Scenario
  public var messages: String
  public var out: String
  public var threads: Int
  public var overwrite: Bool
  /// How long to wait for a writer holding a snapshot locked.
  public var busyTimeoutMilliseconds = SnapshotLoader.defaultBusyTimeoutMilliseconds
  /// The files the scenarios' SQL was read from (`--sql-file`,
  /// `--variant`): read before the output folder is claimed, and never
  /// removed by `overwrite` all the same.
  package var sqlFiles: [OutputFolder.Input] = []
  /// Seconds a scenario's SQL may run before it is stopped (nil: no limit).
  public var sqlTimeoutSeconds: Int? = WhatIfOptions.defaultSQLTimeoutSeconds
  public static let defaultSQLTimeoutSeconds = 60
  /// Pushes per user per day above which a user counts as over budget.
  public var budget = WhatIfOptions.defaultBudget
  public static let defaultBudget = 20
  /// Where compiled snapshots are read from and added to (A and B with
  /// `--against`; with `--sql`, A is read from SQLite for its rows, over
  /// which each B is built); nil for none.
  public var indexCache: IndexCache? = nil
  /// Whether a B shares A's work where it can: tallied as its difference
  /// from A when its pairs fall in A's slices, deciding again only the
  /// pairs whose quiet hours it changed (false: every B evaluated and
  /// tallied whole, as the tests compare).
  var sharesWorkWithA = true
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
  case scenario(WhatIfError.Scenario)
  /// Snapshot B (the file, or A with the SQL applied) was refused.
  case refusedB(SnapshotError, fromSQL: Bool)
  /// B does not have the same users, channels or categories as A.
  case incompatible(String)
  /// A sweep's variant (by name) could not be made or compared.
  indirect case variant(String, WhatIfError)

  public var description: String {
    switch self {
    case .run(let e): e.description
    case .scenario(let e): e.description
    case .refusedB(let e, let fromSQL):
      (fromSQL ? "snapshot A with --sql applied: " : "snapshot B: ") + e.description
    case .incompatible(let reason): "snapshots A and B cannot be compared: \(reason)"
    case .variant(let name, let e): "--variant \(name): \(e.description)"
    }
  }

  public var exitStatus: ExitStatus {
    switch self {
    case .run(let e): e.exitStatus
    case .scenario(.sql), .scenario(.refused), .scenario(.timedOut): .usage
    case .scenario(.copy): .cannotCreate
    case .refusedB(let e, _): e.exitStatus
    case .incompatible: .dataError
    case .variant(_, let e): e.exitStatus
    }
  }
}

public enum WhatIf {
  /// Runs `fanout whatif`: loads both snapshots, evaluates the traffic against
  /// both in one pass, and writes the report files.
  public static func run(_ options: WhatIfOptions) throws(WhatIfError) -> WhatIfReport {
    let compared = try compare(options, bs: [(nil, options.scenario)])
    var report = compared.reports[0]
    try compared.writing { () throws(OutputError) in
      let changes = compared.changes[0]
      try changes.close()
      let html = try PendingFile(directory: options.out, name: "report.html")
      try html.write(report.html())
      let json = try PendingFile(directory: options.out, name: "report.json")
      try json.write(report.json())
      // All or none; report.json last: its presence marks completion.
      try PendingFile.commit(together: [changes.file, compared.rejected, html, json])
    }
    compared.lap("report")
    report.phases = compared.phases()
    return report
  }

  /// Runs a sweep: every variant against A in one pass over the traffic
  /// (A evaluated once), each compared with A as `run` would; writes
  /// `changes-NAME.ndjson.lz4` per variant, one page and one report.json.
  public static func sweep(_ options: WhatIfOptions, variants: [WhatIfOptions.Variant])
    throws(WhatIfError) -> SweepReport
  {
    let compared = try compare(
      options, bs: variants.map { ($0.name, WhatIfOptions.Scenario.sql($0.sql)) })
    var sweep = SweepReport(variants: zip(variants, compared.reports).map { ($0.name, $1) })
    try compared.writing { () throws(OutputError) in
      var files = [compared.rejected]
      for changes in compared.changes {
        try changes.close()
        files.append(changes.file)
      }
      let html = try PendingFile(directory: options.out, name: "report.html")
      try html.write(sweep.html())
      let json = try PendingFile(directory: options.out, name: "report.json")
      try json.write(sweep.json())
      // All or none; report.json last: its presence marks completion.
      try PendingFile.commit(together: files + [html, json])
    }
    compared.lap("report")
    sweep.phases = compared.phases()
    return sweep
  }

  /// A comparison's results before its report files are written: per B,
  /// its report and its changes file (still pending); the run's rejected
  /// lines, folder and timings.
  private final class Compared {
    var reports: [WhatIfReport] = []
    var changes: [LZ4FrameFile] = []
    var rejected: PendingFile
    let folder: OutputFolder
    let clock = ContinuousClock()
    var phaseStart: ContinuousClock.Instant
    var laps: [(phase: String, seconds: Double)] = []

    init(folder: OutputFolder, rejected: PendingFile) {
      self.folder = folder
      self.rejected = rejected
      phaseStart = clock.now
    }

    /// Files not published by now go, then the folder's claim (and the
    /// folder itself, when the run made it and nothing is left in it).
    deinit {
      rejected.discard()
      for file in changes { file.discard() }
      folder.release()
    }

    func lap(_ phase: String) {
      let now = clock.now
      laps.append((phase, (now - phaseStart).seconds))
      phaseStart = now
    }

    func phases() -> [(phase: String, seconds: Double)] { laps }

    /// A file operation, its error the run's.
    func writing<T>(_ body: () throws(OutputError) -> T) throws(WhatIfError) -> T {
      do { return try body() } catch { throw .run(.output(error)) }
    }
  }

  /// Loads A and each B, evaluates the traffic against all of them in one
  /// pass (A once), and compares each B with A.
  private static func compare(
    _ options: WhatIfOptions, bs: [(name: String?, scenario: WhatIfOptions.Scenario)]
  ) throws(WhatIfError) -> Compared {
    let clock = ContinuousClock()
    let started = clock.now
    let folder: OutputFolder
    do {
      var inputs: [OutputFolder.Input] = [
        .init("--snapshot", options.snapshot), .init("--messages", options.messages),
      ]
      if case .snapshot(let b) = options.scenario { inputs.append(.init("--against", b)) }
      inputs += options.sqlFiles
      folder = try OutputFolder(
        claiming: options.out, mode: .fresh(overwrite: options.overwrite), inputs: inputs)
    } catch { throw .run(error) }
    let rejected: PendingFile
    do { rejected = try PendingFile(directory: options.out, name: "rejected.ndjson") } catch {
      folder.release()
      throw .run(.output(error))
    }
    let compared = Compared(folder: folder, rejected: rejected)
    compared.phaseStart = started
    let reader: LineReader
    do { reader = try LineReader(path: options.messages) } catch { throw .run(.input(error)) }

    // A scenario's copy of A is made first: both only read A, in read
    // transactions of their own, and B, when it is an overlay, reads A
    // again; the watch, looked at once B is loaded, tells whether a commit
    // landed meanwhile, so that B is never made from another state than A.
    let anySQL = bs.contains { if case .sql = $0.scenario { true } else { false } }
    var watch: CommitWatch? = nil
    if anySQL {
      do { watch = try CommitWatch(path: options.snapshot) } catch {
        throw .run(.snapshot(error))
      }
    }
    let forecasts = bs.map { b -> Set<String>? in
      guard case .sql(let sql) = b.scenario else { return nil }
      return ScenarioCopy.tablesWritten(by: sql, in: options.snapshot)
    }
    // Scenarios of a sweep that write the same tables start from one copy of them.
    var templates = OverlayTemplate.shared(by: forecasts, source: options.snapshot)
    // As many scenarios' SQL at a time as there are threads: each keeps
    // the cores busy alone, and each has a page cache of its own
    // (`Connection(scratch:)`), which sixteen at once would multiply.
    let sqlSlots = DispatchSemaphore(value: max(1, options.threads))
    let copies: [Pending<Result<ScenarioCopy, WhatIfError.Scenario>>?] = bs.indices.map { k in
      switch bs[k].scenario {
      case .snapshot: nil
      case .sql(let sql):
        Pending { [template = templates[k]] in
          sqlSlots.wait()
          defer { sqlSlots.signal() }
          return Result { () throws(WhatIfError.Scenario) in
            try ScenarioCopy(
              of: options.snapshot, applying: sql, timeout: options.sqlTimeoutSeconds,
              template: template)
          }
        }
      }
    }
    // SQL that writes only the tables B can be made of from A's index
    // (`SnapshotLoader.tablesOverIndex`) makes B so, sharing every column
    // those tables did not build: A then comes from the index cache, and B
    // reads only the tables its SQL wrote and those the parts it rebuilds
    // need. Otherwise A is read from SQLite for its
    // rows, and each B is built over them, sharing A's columns wherever its
    // SQL left their tables alone (docs/whatif.md).
    let overIndex = zip(bs, forecasts).allSatisfy { b, tables in
      guard case .sql = b.scenario else { return true }
      return tables?.isSubset(of: SnapshotLoader.tablesOverIndex) ?? false
    }
    let a: Index
    var rowsOfA: SnapshotRows? = nil
    do {
      if anySQL && !overIndex {
        let loaded = try SnapshotLoader.loadKeepingRows(
          path: options.snapshot, busyTimeoutMilliseconds: options.busyTimeoutMilliseconds)
        (a, rowsOfA) = (loaded.snapshot.index, loaded.rows)
      } else {
        a = try SnapshotLoader.load(
          path: options.snapshot, busyTimeoutMilliseconds: options.busyTimeoutMilliseconds,
          cache: options.indexCache
        ).index
      }
    } catch {
      for copy in copies { _ = copy?.wait() }  // so that the copies are removed before exiting
      throw .run(.snapshot(error))
    }
    compared.lap("load A")
    var indexes = [a]
    var rowsChanged: [[String: Int]?] = []
    let baseRows = BaseRows()
    for (k, b) in bs.enumerated() {
      // Every overlay B is built from A's rows; the last one takes them.
      // (Loading the Bs side by side gained nothing: each already keeps
      // both cores busy, and the copies run meanwhile.)
      rowsOfA?.sharedWithMore = k < bs.count - 1
      do {
        let (index, changed) = try loadB(
          options, scenario: b.scenario, copy: copies[k], over: rowsOfA, a: a, baseRows: baseRows)
        indexes.append(index)
        rowsChanged.append(changed)
      } catch {
        for copy in copies[(k + 1)...] { _ = copy?.wait() }
        throw b.name.map { .variant($0, error) } ?? error
      }
      if indexes[k + 1] !== a { compared.lap("load B") }
    }
    rowsOfA = nil  // A's rows, if a B built from A's columns alone left them
    templates = []  // (every copy is made)
    if let watch, watch.committedSince() {
      throw .run(
        .snapshot(
          SnapshotError(
            busy: options.snapshot,
            reason: "a writer committed to A while A and B were read for --sql, "
              + "so A and B would come from two states of the file; try again")))
    }
    for (b, index) in zip(bs, indexes.dropFirst()) {
      do { try checkComparable(a, index) } catch {
        throw b.name.map { .variant($0, error) } ?? error
      }
    }

    // The totals' counts per user, per side, and the channels' numbers
    // are zeroed on their queue while the first lines are read and parsed
    // (at 1M users, a sweep of five: some 120 MB; the counts per channel
    // grow as the traffic names channels).
    let totals = BackgroundQueue<RunTotals?, Never>(
      nil, label: "fanout.whatif.totals", inFlight: 2)
    totals.submit { [indexes] in $0 = RunTotals(a: indexes[0], indexes: indexes) }
    var messagesDone = 0
    for b in bs {
      let name = b.name.map { "changes-\($0).ndjson.lz4" } ?? "changes.ndjson.lz4"
      compared.changes.append(
        try compared.writing { () throws(OutputError) in
          try LZ4FrameFile(directory: options.out, name: name)
        })
    }
    let work = ChunkComparer(indexes: indexes, sharingAllowed: options.sharesWorkWithA)
    let engine = EvaluationEngine(index: a, threads: options.threads, work: work)
    engine.countsBadges = true
    var rejectedLines = 0
    var firstRejection: Rejection?
    try engine.run(
      // A wave's outputs (tallies, compressed change lines) are small: each
      // wave is one group of chunks. (At 1M, groups of `chunksInFlight`
      // took a third longer to evaluate and compare, and more CPU.)
      reader, groupSize: .max,
      readFailed: { WhatIfError.run(.input($0)) },
      deliver: { chunks throws(WhatIfError) in
        for chunk in chunks {
          for (k, changes) in chunk.changes.enumerated() {
            try compared.writing { () throws(OutputError) in
              try compared.changes[k].append(blocks: changes.changeBlocks)
            }
          }
          messagesDone += chunk.sides[0].counters.messages
        }
        // Merged on a queue of their own while the workers go on.
        totals.submit { $0?.add(chunks) }
      },
      waveDone: { batches throws(WhatIfError) in
        for batch in batches where !batch.rejections.isEmpty {
          rejectedLines += batch.rejections.count
          if firstRejection == nil { firstRejection = batch.rejections.first }
          try compared.writing { () throws(OutputError) in
            try compared.rejected.write(RejectedLines.json(batch.rejections))
          }
        }
        options.progress?(messagesDone, reader.fractionRead)
      })
    guard let run = totals.finish() else { preconditionFailure("the totals are made first") }
    compared.lap("evaluate and compare")
    try compared.writing { () throws(OutputError) in try compared.rejected.sync() }
    let notifications = zip(engine.notificationCounters, engine.badges).map { counters, badges in
      counters.map { WhatIfReport.Notifications(counters: $0, badges: badges ?? .init()) }
    }
    // Each B's report on a core of its own (a sweep of five at 1M: its
    // top users and channels, pushes per day, 0.03 s each).
    let (relative, linesRead) = (work.relative, engine.linesRead)
    compared.reports = runChunks(count: bs.count, workers: options.threads, empty: nil) {
      [indexes, rowsChanged, firstRejection, rejectedLines] k -> WhatIfReport? in
      var totals = ComparisonTotals(
        a: run.sides[0],
        b: relative[k] ? run.sides[k + 1].over(run.sides[0]) : run.sides[k + 1],
        channels: run.channels, changes: run.changes[k], firstTs: run.firstTs, lastTs: run.lastTs)
      totals.rejected = rejectedLines
      var report = WhatIfReport(
        totals, a: a, b: indexes[k + 1], options: options, scenario: bs[k].scenario,
        notifications: [notifications[0], notifications[k + 1]])
      report.sides[1].rowsChanged = rowsChanged[k]?.sorted { $0.key < $1.key }.map {
        ($0.key, $0.value)
      }
      report.firstRejection = firstRejection
      report.linesRead = linesRead
      return report
    }.map { $0! }
    // The examples' message ids, from their lines: one read of the traffic.
    let ids = WhatIfReport.messageIDs(
      path: options.messages,
      lines: compared.reports.reduce(into: []) { $0.formUnion($1.exampleLines) })
    for k in compared.reports.indices { compared.reports[k].nameExamples(ids) }
    return compared
  }

  /// A comparison's totals over the run, merged chunk by chunk in input
  /// order: per side, its tally; per B, its changes against A.
  private struct RunTotals {
    var channels: ChannelNumbers
    var sides: [SideTotals]
    var changes: [ChangeTotals]
    var firstTs = Int64.max
    var lastTs = Int64.min

    init(a: Index, indexes: [Index]) {
      channels = ChannelNumbers(channels: a.channels.count)
      sides = indexes.map {
        SideTotals(users: a.users.count, channels: a.channels.count, gateways: $0.gateways.count)
      }
      changes = indexes.dropFirst().map { _ in
        ChangeTotals(users: a.users.count, channels: a.channels.count)
      }
    }

    mutating func add(_ chunks: [ComparedChunk]) {
      for chunk in chunks {
        let numbers = channels.number(chunk.messageChannels)
        for (s, side) in chunk.sides.enumerated() {
          sides[s].add(side, channels: numbers, numbered: channels.count)
        }
        for (k, changes) in chunk.changes.enumerated() { self.changes[k].add(changes) }
        firstTs = min(firstTs, chunk.firstTs)
        lastTs = max(lastTs, chunk.lastTs)
      }
    }
  }

  /// Loads B: the `--against` file, or the scenario's copy of A once it is
  /// made, with the rows the SQL changed per table (nil for a file). SQL
  /// that writes no table (`SELECT 1`, a comment, nothing) leaves B = A.
  private static func loadB(
    _ options: WhatIfOptions, scenario: WhatIfOptions.Scenario,
    copy scenarioCopy: Pending<Result<ScenarioCopy, WhatIfError.Scenario>>?,
    over rowsOfA: SnapshotRows?, a: Index, baseRows: BaseRows
  ) throws(WhatIfError) -> (Index, rowsChanged: [String: Int]?) {
    var copy: ScenarioCopy? = nil
    if let scenarioCopy {
      do { copy = try scenarioCopy.wait().get() } catch { throw .scenario(error) }
      if copy!.changesNothing { return (a, copy!.rowsChanged) }
    }
    let path: String =
      switch scenario {
      case .snapshot(let file): file
      case .sql: copy!.path
      }
    let loaded: Snapshot
    do {
      if let copy, let base = copy.base,
        let index = try SnapshotLoader.index(
          overlay: path, base: base, over: a,
          usersColumnsChanged: copy.writes.columnsChanged(in: "users"), baseRows: baseRows,
          busyTimeoutMilliseconds: options.busyTimeoutMilliseconds)
      {
        return (index, copy.rowsChanged)
      }
      loaded = try SnapshotLoader.load(
        path: path, base: copy?.base, over: rowsOfA,
        busyTimeoutMilliseconds: options.busyTimeoutMilliseconds,
        cache: copy == nil ? options.indexCache : nil)
    } catch {
      throw .refusedB(error, fromSQL: copy != nil)
    }
    withExtendedLifetime(copy) {}  // the copy's file is removed with it
    return (loaded.index, copy?.rowsChanged)
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
