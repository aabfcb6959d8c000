import ArgumentParser
import FanoutKernel
import FanoutModel
import FanoutPipeline
import FanoutWhatIf

#if canImport(Glibc)
  import Glibc
#endif

extension Fanout {
  struct WhatIfCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
      commandName: "whatif",
      abstract: "Replay traffic against two snapshots and report what changes.",
      discussion: """
        B is either another snapshot (--against) or A with SQL (--sql / --sql-file) applied \
        to a private copy in $TMPDIR, of only the tables the SQL writes when it can (A itself \
        is never modified): exactly one of the two is required. A sweep (--variant NAME=FILE.sql, \
        2 to 16 times, instead of both) compares each variant with A in one pass over the \
        traffic: one page and report.json for all, changes-NAME.ndjson.lz4 per variant. \
        The SQL may change only the copy's rows and tables: ATTACH, DETACH, VACUUM, PRAGMA, \
        extensions and a transaction left open are refused (exit 64). Writes report.json, \
        report.html, changes.ndjson.lz4 and rejected.ndjson to the output folder.

        Exit codes: 0 success, 64 bad command line, refused SQL or output folder, \
        65 a snapshot refused or B not comparable with A, 66 messages or snapshot file unreadable, \
        71 out of memory for a ledger (rule 8's throttle, contract v3's notifications), 73 output \
        could not be written, 75 a snapshot busy.
        """)

    @Option(help: "Snapshot A, the baseline (SQLite).")
    var snapshot: String

    @Option(help: "Snapshot B, compared with A (this, or --sql / --sql-file, is required).")
    var against: String?

    @Option(
      parsing: .unconditionalSingleValue,
      help: "SQL run on a copy of A to make B (repeatable; run in order; or --against).")
    var sql: [String] = []

    @Option(help: "A file of SQL run on a copy of A to make B (repeatable; run before --sql).")
    var sqlFile: [String] = []

    @Option(help: "The traffic: NDJSON messages, or - for standard input.")
    var messages: String

    @Option(help: "The output folder: created if needed, must be empty unless --overwrite.")
    var out: String

    @Option(
      help: ArgumentHelp(
        "A sweep's variant: a name (letters, digits, '.', '_', '-') and a file of SQL run on a copy of A (2 to 16).",
        valueName: "NAME=FILE.sql"))
    var variant: [String] = []

    @Option(
      parsing: .unconditional,
      help: "Pushes per user per day above which a user is over budget.")
    var budget = WhatIfOptions.defaultBudget

    @Option(
      parsing: .unconditional,
      help:
        "Seconds the scenario's SQL may run before it is stopped, 0 for no limit.")
    var sqlTimeout = WhatIfOptions.defaultSQLTimeoutSeconds

    @OptionGroup var runOptions: RunOptions
    @OptionGroup var indexCacheOptions: IndexCacheOptions

    func validate() throws {
      if budget < 0 { throw ValidationError("--budget must be at least 0") }
      if sqlTimeout < 0 { throw ValidationError("--sql-timeout must be at least 0") }
      if !variant.isEmpty {
        guard against == nil && sql.isEmpty && sqlFile.isEmpty else {
          throw ValidationError(
            "--variant makes a sweep: give it without --against, --sql and --sql-file")
        }
        guard (2...WhatIfOptions.maxVariants).contains(variant.count) else {
          throw ValidationError(
            "a sweep takes 2 to \(WhatIfOptions.maxVariants) --variant options, not \(variant.count)"
          )
        }
        var names: Set<String> = []
        for v in variant {
          let (name, _) = try Self.split(v)
          guard names.insert(name).inserted else {
            throw ValidationError("--variant: the name '\(name)' is given twice")
          }
        }
        return
      }
      if (against == nil) == (sql.isEmpty && sqlFile.isEmpty) {
        throw ValidationError(
          "give exactly one of --against FILE and --sql \"SQL\" / --sql-file FILE"
            + " (or --variant NAME=FILE.sql for a sweep)")
      }
    }

    /// NAME=FILE.sql, the name fit for a file name.
    private static func split(_ v: String) throws -> (name: String, file: String) {
      guard let eq = v.firstIndex(of: "=") else {
        throw ValidationError("--variant '\(v)': write it NAME=FILE.sql")
      }
      let name = String(v[..<eq])
      let file = String(v[v.index(after: eq)...])
      let allowed = name.utf8.allSatisfy { c in
        (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A)
          || c == UInt8(ascii: ".") || c == UInt8(ascii: "_") || c == UInt8(ascii: "-")
      }
      guard !name.isEmpty, name.utf8.count <= 64, allowed, !name.hasPrefix("."), !file.isEmpty
      else {
        throw ValidationError(
          "--variant '\(v)': the name must be 1 to 64 letters, digits, '.', '_' or '-' "
            + "(not starting with '.'), then '=' and a file of SQL")
      }
      return (name, file)
    }

    /// The scenario's SQL: the files' text, then the --sql texts.
    private func scenarioSQL() throws(PipelineError) -> String {
      var parts: [String] = []
      for path in sqlFile {
        switch readSQLFile(path) {
        case .success(let text): parts.append(text)
        case .failure(let error): throw .usage("cannot read --sql-file '\(path)': \(error)")
        }
      }
      return (parts + sql).joined(separator: ";\n")
    }

    func run() throws {
      if !variant.isEmpty { return try runSweep() }
      var scenario = WhatIfOptions.Scenario.snapshot(against ?? "")
      if against == nil {
        do { scenario = .sql(try scenarioSQL()) } catch { throw fail(error) }
      }
      try running(scenario, WhatIf.run) { report in
        reportRejections(
          report.rejected, first: report.firstRejection, linesRead: report.linesRead,
          messages: report.messages, folder: out)
        print(headline(report), terminator: "")
      }
    }

    private func runSweep() throws {
      var variants: [WhatIfOptions.Variant] = []
      for v in variant {
        let (name, file) = try Self.split(v)
        switch readSQLFile(file) {
        case .success(let text): variants.append(.init(name: name, sql: text))
        case .failure(let error):
          throw fail(
            PipelineError.usage("cannot read --variant \(name)'s file '\(file)': \(error)"))
        }
      }
      let sweep = { (options: WhatIfOptions) throws(WhatIfError) in
        try WhatIf.sweep(options, variants: variants)
      }
      try running(.sql(""), sweep) { sweep in
        let first = sweep.variants[0].report
        reportRejections(
          first.rejected, first: first.firstRejection, linesRead: first.linesRead,
          messages: first.messages, folder: out)
        print(sweep.text, terminator: "")
        print("report in \(out)/report.html")
        print(
          "\(threeDecimals(sweep.seconds)) s: "
            + sweep.phases.map { "\($0.phase) \(threeDecimals($0.seconds)) s" }.joined(
              separator: ", "))
      }
    }

    /// Runs `body` with this command line's options for `scenario` (and a
    /// progress bar when standard error is a terminal), then `done` with its
    /// result once the bar is cleared; an error exits with its status.
    private func running<R>(
      _ scenario: WhatIfOptions.Scenario, _ body: (WhatIfOptions) throws(WhatIfError) -> R,
      done: (R) -> Void
    ) throws {
      var options = WhatIfOptions(
        snapshot: snapshot, scenario: scenario, messages: messages, out: out,
        threads: runOptions.workerThreads, overwrite: runOptions.overwrite)
      options.busyTimeoutMilliseconds = runOptions.busyTimeout
      options.indexCache = indexCacheOptions.cache
      options.budget = budget
      options.sqlTimeoutSeconds = sqlTimeout == 0 ? nil : sqlTimeout
      options.sqlFiles =
        sqlFile.map { .init("--sql-file", $0) }
        + variant.compactMap { v in (try? Self.split(v)).map { .init("--variant", $0.file) } }
      let progress = ProgressBar.ifTerminal()
      options.progress = progress?.update
      let result: R
      do { result = try body(options) } catch {
        progress?.clear()
        throw fail(error, status: error.exitStatus)
      }
      progress?.clear()
      done(result)
    }

    /// The headline deltas as a small table.
    private func headline(_ r: WhatIfReport) -> String {
      let a = r.sides[0]
      let b = r.sides[1]
      var rows: [(String, Int, Int)] = [
        ("pairs", a.pairs, b.pairs), ("delivered", a.delivered, b.delivered),
      ]
      if a.deferred != 0 || b.deferred != 0 { rows.append(("  deferred", a.deferred, b.deferred)) }
      let deliveriesA = Dictionary(
        uniqueKeysWithValues: r.deliveries(.a).map { ($0.gateway, $0.count) })
      let deliveriesB = Dictionary(
        uniqueKeysWithValues: r.deliveries(.b).map { ($0.gateway, $0.count) })
      for g in r.gateways where deliveriesA[g] != nil || deliveriesB[g] != nil {
        rows.append(("  \(g) deliveries", deliveriesA[g] ?? 0, deliveriesB[g] ?? 0))
      }
      for reason in Reason.allCases {
        let i = Int(reason.rawValue)
        if a.suppressed[i] != 0 || b.suppressed[i] != 0 {
          rows.append(("  \(reason.name)", a.suppressed[i], b.suppressed[i]))
        }
      }
      if a.notifications != nil || b.notifications != nil {
        let none = NotificationCounters()
        let (x, y) = (a.notifications?.counters ?? none, b.notifications?.counters ?? none)
        rows += [
          ("notifications hidden", x.hidden, y.hidden),
          ("  cancelled", x.cancelled, y.cancelled),
          ("  unread at the end", x.unread, y.unread),
        ]
      }
      let (pa, pb) = (r.pushesPerDay[0], r.pushesPerDay[1])
      rows.append(("users over \(r.budget) pushes/day", pa.overBudget, pb.overBudget))
      func pad(_ s: String, _ n: Int, left: Bool = false) -> String {
        let fill = String(repeating: " ", count: max(0, n - s.count))
        return left ? s + fill : fill + s
      }
      let width = max(13, rows.map(\.0.count).max() ?? 0)
      var text = pad("", width, left: true) + pad("A", 14) + pad("B", 14) + pad("change", 14) + "\n"
      for (name, x, y) in rows {
        let change = y - x
        text +=
          pad(name, width, left: true) + pad(String(x), 14) + pad(String(y), 14)
          + pad(change > 0 ? "+\(change)" : String(change), 14) + "\n"
      }
      if let words = b.rowsChangedWords { text += "the SQL changed \(words)\n" }
      text += r.headline + "\n"
      text +=
        "\(r.messages) messages, \(r.rejected) rejected, \(r.changedPairs) pairs changed outcome "
        + "for \(r.usersAffected) users; report in \(out)/report.html\n"
      text +=
        "\(threeDecimals(r.seconds)) s: "
        + r.phases.map { "\($0.phase) \(threeDecimals($0.seconds)) s" }.joined(separator: ", ")
        + "\n"
      return text
    }
  }
}

/// Why a file of SQL was not taken (`readSQLFile`).
enum SQLFileError: Error, CustomStringConvertible {
  case unreadable(SystemCallError)
  /// Larger than `readSQLFile`'s limit (an endless file like /dev/zero).
  case tooLarge(limit: Int)
  /// A byte SQLite would not receive as written: a NUL ends its text
  /// there, invalid UTF-8 would be replaced.
  case notText(byte: Int, what: String)

  var description: String {
    switch self {
    case .unreadable(let error): error.reason
    case .tooLarge(let limit): "larger than \(limit >> 20) MiB"
    case .notText(let byte, let what): "not SQL text: byte \(byte) is \(what)"
    }
  }
}

/// The whole content of a file of SQL (at most `limit` bytes), refused if
/// any of it would not reach SQLite as written: statements after a NUL byte
/// would be silently dropped, invalid UTF-8 silently replaced.
func readSQLFile(_ path: String, limit: Int = 256 << 20) -> Result<String, SQLFileError> {
  let read: [UInt8]?
  do {
    let fd = try systemCall("open") { open(path, O_RDONLY | O_CLOEXEC) }
    defer { close(fd) }
    read = try readToEnd(fd, limit: limit)
  } catch {
    return .failure(.unreadable(error))
  }
  guard let bytes = read else { return .failure(.tooLarge(limit: limit)) }
  if let nul = bytes.firstIndex(of: 0) { return .failure(.notText(byte: nul + 1, what: "NUL")) }
  guard let text = String(validating: bytes, as: UTF8.self) else {
    let valid = bytes.withUnsafeBufferPointer { validUTF8Prefix($0) }
    return .failure(.notText(byte: valid + 1, what: "not UTF-8"))
  }
  return .success(text)
}

/// How many of `bytes`' first bytes are whole UTF-8 characters.
private func validUTF8Prefix(_ bytes: UnsafeBufferPointer<UInt8>) -> Int {
  var decoder = UTF8()
  var iterator = bytes.makeIterator()
  var valid = 0
  while case .scalarValue(let scalar) = decoder.decode(&iterator) {
    valid += UTF8.width(scalar)
  }
  return valid
}
