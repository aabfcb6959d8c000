import CSQLite
import FanoutModel
import FanoutSQLite
import FanoutSnapshot

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// Why a what-if scenario's snapshot could not be made (`WhatIfError.scenario`).
extension WhatIfError {
  public enum Scenario: Error, CustomStringConvertible {
    /// The source could not be copied (or a temporary folder made).
    case copy(String)
    /// The scenario's SQL failed on the copy.
    case sql(SQLiteError)
    /// The scenario's SQL tried what a scenario may not do.
    case refused(String)
    /// The scenario's SQL ran past its time limit (`--sql-timeout`, seconds).
    case timedOut(seconds: Int)

    public var description: String {
      switch self {
      case .copy(let reason): "cannot copy the snapshot for --sql: \(reason)"
      case .sql(let error): "--sql failed: \(error.message)"
      case .refused(let reason): "--sql refused: \(reason)"
      case .timedOut(let seconds):
        "--sql stopped: it ran longer than --sql-timeout (\(seconds) s); B was not made"
      }
    }
  }
}

/// A private snapshot made of another with a what-if scenario's SQL
/// applied, in a temporary folder that is removed with the value. The
/// source is opened read-only, so it is never modified.
///
/// Most scenarios change a table or two: their B is an overlay (`base` is
/// the source), a new file holding a copy of each table the SQL writes,
/// made just before the statement that first writes it, read together with
/// the source's other tables (`SnapshotLoader.load(path:base:)`). SQL the
/// overlay could not answer exactly as a whole copy would — schema changes,
/// names qualified with `main.`, a source with views, triggers or
/// AUTOINCREMENT, any error — runs again from the start on a whole copy
/// (`copySnapshotPages`), whose answer is the scenario's.
///
/// An overlay reads the source at several moments (each table's copy, each
/// statement, the load of B): its caller must watch for commits to the
/// source meanwhile (`CommitWatch`), as `fanout whatif` does.
public final class ScenarioCopy: Sendable {
  public let path: String
  /// The snapshot an overlay lies over; nil for a whole copy.
  public let base: String?
  private let folder: ScenarioFolder
  /// Removes the folder if a signal ends the run (`CleanupOnSignal`).
  private let cleanup: Int
  /// Rows the SQL inserted, updated or deleted, per table it wrote (a
  /// table it wrote no row of is listed with 0).
  public let rowsChanged: [String: Int]
  /// What the SQL may have written, per table.
  public let writes: Writes
  /// The SQL wrote no table (`SELECT 1`, a comment, nothing): the scenario
  /// is the source itself.
  public var changesNothing: Bool { rowsChanged.isEmpty && base != nil && isEmptyFile }

  private var isEmptyFile: Bool {
    var info = stat()
    return stat(path, &info) != 0 || info.st_size == 0
  }

  /// - Parameters:
  ///   - timeout: seconds the SQL may run (copying the tables it writes
  ///     included) before it is stopped; nil for no limit.
  ///   - template: the tables the SQL is forecast to write, already
  ///     copied for a sweep's scenarios: an overlay starts as a copy of it.
  init(
    of source: String, applying sql: String, timeout: Int? = nil, template: OverlayTemplate? = nil
  )
    throws(WhatIfError.Scenario)
  {
    let temporary = ScenarioFolder.temporary
    ScenarioFolder.removeAbandoned(in: temporary)
    let made: (made: ScenarioFolder, cleanup: Int)
    do {
      made = try CleanupOnSignal.make(
        { () throws(SystemCallError) in try ScenarioFolder.make(in: temporary) },
        undoneBy: { folder in folder.remove() })
    } catch {
      throw .copy("mkdtemp in '\(temporary)': \(error.reason)")
    }
    folder = made.made
    path = folder.snapshotPath
    cleanup = made.cleanup
    do {
      let made = try Self.make(
        applying: sql, to: source, in: folder, deadline: timeout.map(Deadline.init(seconds:)),
        template: template)
      base = made.overlay ? source : nil
      (rowsChanged, writes) = (made.applied.rowsChanged, made.applied.writes)
    } catch {
      CleanupOnSignal.withdraw(cleanup)
      folder.remove()
      throw error
    }
  }

  deinit {
    CleanupOnSignal.withdraw(cleanup)
    folder.remove()
  }

  /// Makes the scenario's snapshot in `folder`: an overlay of `source` if
  /// it can, else a whole copy; with what the SQL changed.
  private static func make(
    applying sql: String, to source: String, in folder: ScenarioFolder, deadline: Deadline?,
    template: OverlayTemplate?
  ) throws(WhatIfError.Scenario) -> (overlay: Bool, applied: Applied) {
    let path = folder.snapshotPath
    if let applied = try applyOnOverlay(
      sql, over: source, at: path, deadline: deadline, template: template)
    {
      return (true, applied)
    }
    folder.removeSnapshot()
    do {
      try copySnapshotPages(
        from: source, to: path,
        busyTimeoutMilliseconds: SnapshotLoader.defaultBusyTimeoutMilliseconds)
    } catch { throw .copy(error.message) }
    let copy: Connection
    do { copy = try Connection(scratch: path) } catch { throw .sql(error) }
    return (false, try apply(sql, to: copy, deadline: deadline))
  }

  /// Applies `sql` to a new overlay of `source` at `path` (a copy of
  /// `template`'s tables, if any), returning what it changed; nil when the
  /// scenario needs a whole copy instead (the overlay is then garbage). A
  /// refusal is final: the whole copy would refuse the same statement.
  private static func applyOnOverlay(
    _ sql: String, over source: String, at path: String, deadline: Deadline?,
    template: OverlayTemplate?
  ) throws(WhatIfError.Scenario) -> Applied? {
    let tables: OverlayTables
    do throws(SQLiteError) {
      // (Without the template's copy, the overlay copies its tables itself.)
      _ = template?.copy(to: path)
      let overlay = try Connection(scratch: path, base: source)
      guard try OverlayTables.canOverlay(overlay) else { return nil }
      tables = OverlayTables(overlay)
    } catch {
      return nil
    }
    do {
      return try apply(sql, to: tables.connection, overlay: tables, deadline: deadline)
    } catch {
      if let refusal = tables.refusal { throw .refused(refusal) }
      // Its time is spent: a whole copy would only run it as long again.
      if case .timedOut = error { throw error }
      if tables.needsWholeCopy || tables.hasTablesToCopy { return nil }
      if case .refused = error { throw error }
      return nil  // (.sql, .copy: the whole copy answers)
    }
  }

  /// What the SQL may have written, table by table (names lower-cased),
  /// as the authorizer saw its statements prepared: the columns its
  /// UPDATEs set, and the tables it inserted rows into or deleted rows from.
  public struct Writes: Sendable {
    var columnsUpdated: [String: Set<String>] = [:]
    var rowsAddedOrRemoved: Set<String> = []

    /// The columns of `table` the SQL may have changed (lower-cased); nil
    /// when it may have added or removed rows. (An `OR REPLACE` conflict
    /// deletes rows the authorizer is not told of: a loader relying on this
    /// still checks B's keys against A's, as `SnapshotLoader.index(overlay:)`
    /// checks the users'.)
    public func columnsChanged(in table: String) -> Set<String>? {
      rowsAddedOrRemoved.contains(table) ? nil : columnsUpdated[table] ?? []
    }
  }

  /// What a scenario's SQL did to its copy.
  struct Applied {
    /// The rows each statement changed (`sqlite3_changes`), per the table
    /// it writes.
    var rowsChanged: [String: Int] = [:]
    var writes = Writes()
  }

  /// What the authorizer learns of the statement being prepared: the table
  /// it writes (its first INSERT, UPDATE or DELETE target), every write it
  /// may make, and the overlay's answer for the rest.
  private final class Preparing {
    let overlay: OverlayTables?
    var target: String?
    var writes = Writes()

    init(_ overlay: OverlayTables?) { self.overlay = overlay }
  }

  static let confinement =
    "a scenario changes only its private copy of A's rows and tables "
    + "(ATTACH, DETACH, VACUUM, PRAGMA and extensions are refused)"

  /// Runs the scenario's statements one by one on the copy, confined to it:
  /// an authorizer denies ATTACH, DETACH and PRAGMA (which could reach other
  /// files, A among them, or change how the copy is stored), VACUUM (`VACUUM
  /// INTO` writes a file anywhere) is refused by its statement, extension
  /// loading stays off; and SQL that leaves a transaction open is refused
  /// rather than silently rolled back. On an `overlay`, a statement that
  /// would write a table of the base is prepared again once the table is
  /// copied into the overlay.
  ///
  /// - Returns: the rows each statement changed, and what it may have
  ///   written.
  @discardableResult
  static func apply(
    _ sql: String, to copy: Connection, overlay: OverlayTables? = nil, deadline: Deadline? = nil
  ) throws(WhatIfError.Scenario) -> Applied {
    let authorize:
      @convention(c) (
        UnsafeMutableRawPointer?, Int32, UnsafePointer<CChar>?, UnsafePointer<CChar>?,
        UnsafePointer<CChar>?, UnsafePointer<CChar>?
      ) -> Int32 = { context, action, table, column, database, _ in
        switch action {
        case SQLITE_ATTACH, SQLITE_DETACH, SQLITE_PRAGMA: return SQLITE_DENY
        default: break
        }
        let preparing = Unmanaged<Preparing>.fromOpaque(context!).takeUnretainedValue()
        if action == SQLITE_INSERT || action == SQLITE_UPDATE || action == SQLITE_DELETE,
          let table
        {
          let name = String(cString: table)
          let key = name.lowercased()
          if preparing.target == nil && !key.hasPrefix("sqlite_") { preparing.target = name }
          if action == SQLITE_UPDATE, let column {
            preparing.writes.columnsUpdated[key, default: []].insert(
              String(cString: column).lowercased())
          } else {
            preparing.writes.rowsAddedOrRemoved.insert(key)
          }
        }
        return preparing.overlay?.authorize(action, table: table, database: database) ?? SQLITE_OK
      }
    let preparing = Preparing(overlay)
    var changed: [String: Int] = [:]
    let context = Unmanaged.passUnretained(preparing).toOpaque()
    sqlite3_set_authorizer(copy.handle, authorize, context)
    defer { sqlite3_set_authorizer(copy.handle, nil, nil) }
    if let deadline { deadline.watch(copy) }
    defer { if deadline != nil { Deadline.unwatch(copy) } }
    var failure: WhatIfError.Scenario?
    sql.withCString { text in
      var next: UnsafePointer<CChar>? = text
      while let start = next, start.pointee != 0 {
        var statement: OpaquePointer?
        preparing.target = nil
        var code = sqlite3_prepare_v2(copy.handle, start, -1, &statement, &next)
        if code == SQLITE_AUTH, let overlay, overlay.hasTablesToCopy {
          // Outside the authorizer: copying reads the base's schema with PRAGMAs.
          sqlite3_set_authorizer(copy.handle, nil, nil)
          let copied = overlay.copyPendingTables()
          sqlite3_set_authorizer(copy.handle, authorize, context)
          guard copied else {
            failure =
              overlay.refusal.map(WhatIfError.Scenario.refused)
              ?? .copy("the overlay could not copy a table")
            return
          }
          next = start
          continue
        }
        guard code == SQLITE_OK else {
          failure = Self.failure(copy, code, deadline)
          return
        }
        guard let statement else { continue }  // only spaces or comments
        defer { sqlite3_finalize(statement) }
        if Self.firstKeyword(start) == "VACUUM" {
          failure = .refused(confinement)
          return
        }
        repeat { code = sqlite3_step(statement) } while code == SQLITE_ROW
        guard code == SQLITE_DONE else {
          failure = Self.failure(copy, code, deadline)
          return
        }
        if let table = preparing.target {
          changed[table.lowercased(), default: 0] += Int(sqlite3_changes(copy.handle))
        }
      }
    }
    if let failure { throw failure }
    if sqlite3_get_autocommit(copy.handle) == 0 {
      try? copy.execute("ROLLBACK")
      throw .refused(
        "it leaves a transaction open (BEGIN or SAVEPOINT without COMMIT or RELEASE);"
          + " end it, or leave transactions out: the scenario runs as one")
    }
    return Applied(rowsChanged: changed, writes: preparing.writes)
  }

  /// The tables `sql` would write (INSERT, UPDATE or DELETE), lower-cased,
  /// found by preparing its statements on `source` without running them;
  /// nil when that cannot tell (a statement that does not prepare before
  /// the ones before it ran, a schema change, a PRAGMA). A forecast, made
  /// before the copy, to choose where A is loaded from: the copy's own
  /// tables decide what B is.
  public static func tablesWritten(by sql: String, in source: String) -> Set<String>? {
    guard let connection = try? Connection(path: source) else { return nil }
    final class Writes {
      var tables: Set<String> = []
      var unknown = false
    }
    let authorize:
      @convention(c) (
        UnsafeMutableRawPointer?, Int32, UnsafePointer<CChar>?, UnsafePointer<CChar>?,
        UnsafePointer<CChar>?, UnsafePointer<CChar>?
      ) -> Int32 = { context, action, table, _, _, _ in
        let writes = Unmanaged<Writes>.fromOpaque(context!).takeUnretainedValue()
        switch action {
        case SQLITE_SELECT, SQLITE_READ, SQLITE_FUNCTION, SQLITE_RECURSIVE, SQLITE_TRANSACTION,
          SQLITE_SAVEPOINT:
          return SQLITE_OK
        case SQLITE_INSERT, SQLITE_UPDATE, SQLITE_DELETE:
          if let table { writes.tables.insert(String(cString: table).lowercased()) }
          return SQLITE_OK
        default:
          writes.unknown = true
          return SQLITE_DENY
        }
      }
    let writes = Writes()
    sqlite3_set_authorizer(
      connection.handle, authorize, Unmanaged.passUnretained(writes).toOpaque())
    defer { sqlite3_set_authorizer(connection.handle, nil, nil) }
    return sql.withCString { text -> Set<String>? in
      var next: UnsafePointer<CChar>? = text
      while let start = next, start.pointee != 0 {
        var statement: OpaquePointer?
        guard sqlite3_prepare_v2(connection.handle, start, -1, &statement, &next) == SQLITE_OK
        else { return nil }
        sqlite3_finalize(statement)
        if writes.unknown || firstKeyword(start) == "VACUUM" { return nil }
      }
      return writes.tables
    }
  }

  private static func failure(_ copy: Connection, _ code: Int32, _ deadline: Deadline?)
    -> WhatIfError.Scenario
  {
    if code == SQLITE_AUTH { return .refused(confinement) }
    if code == SQLITE_INTERRUPT, let deadline, deadline.passed {
      return .timedOut(seconds: deadline.seconds)
    }
    return .sql(SQLiteError.from(copy.handle, code: code, sql: nil))
  }

  /// The statement's first keyword, upper-cased, past spaces and comments.
  static func firstKeyword(_ text: UnsafePointer<CChar>) -> String {
    var p = text
    while true {
      while p.pointee != 0, isspace(Int32(UInt8(bitPattern: p.pointee))) != 0 { p += 1 }
      if p[0] == 0x2D && p[1] == 0x2D {  // -- to the end of the line
        while p.pointee != 0 && p.pointee != 0x0A { p += 1 }
      } else if p[0] == 0x2F && p[1] == 0x2A {  // /* to */
        p += 2
        while p.pointee != 0 && !(p[0] == 0x2A && p[1] == 0x2F) { p += 1 }
        if p.pointee != 0 { p += 2 }
      } else {
        break
      }
    }
    var word: [UInt8] = []
    while isalpha(Int32(UInt8(bitPattern: p.pointee))) != 0 {
      word.append(UInt8(toupper(Int32(UInt8(bitPattern: p.pointee)))))
      p += 1
    }
    return String(decoding: word, as: UTF8.self)
  }
}

/// When a scenario's SQL must stop (`--sql-timeout`): SQLite asks every
/// few thousand steps of a statement, which then fails with
/// `SQLITE_INTERRUPT`. An endless statement (a recursive CTE without a
/// bound) would otherwise run, and grow its copy, until a signal.
final class Deadline: Sendable {
  let seconds: Int
  private let end: UInt64

  init(seconds: Int) {
    self.seconds = seconds
    let span = UInt64(max(0, seconds)).multipliedReportingOverflow(by: 1_000_000_000)
    let end = Self.now().addingReportingOverflow(span.partialValue)
    self.end = span.overflow || end.overflow ? .max : end.partialValue
  }

  var passed: Bool { Self.now() >= end }

  private static func now() -> UInt64 {
    var time = timespec()
    clock_gettime(CLOCK_MONOTONIC, &time)
    return UInt64(time.tv_sec) &* 1_000_000_000 &+ UInt64(time.tv_nsec)
  }

  /// Stops `connection`'s statements once the deadline has passed.
  func watch(_ connection: Connection) {
    sqlite3_progress_handler(
      connection.handle, 4_096,
      { context in
        Unmanaged<Deadline>.fromOpaque(context!).takeUnretainedValue().passed ? 1 : 0
      }, Unmanaged.passUnretained(self).toOpaque())
  }

  static func unwatch(_ connection: Connection) {
    sqlite3_progress_handler(connection.handle, 0, nil, nil)
  }
}
