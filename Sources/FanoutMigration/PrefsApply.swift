import FanoutIndex
import FanoutModel
import FanoutSQLite
import FanoutSnapshot
import FanoutTraffic
import FoundationEssentials

/// FanoutMigration applies preference changes written in the request shapes
/// of the five source systems (Stream Chat, Sendbird, Easemob, SuprSend,
/// TDLib) to a snapshot, each with that system's documented semantics. A
/// batch is all or nothing: the changes are made on a copy in one
/// transaction and the copy is validated like any snapshot. Only then is the
/// snapshot changed: in place, by the same changes in one transaction begun
/// before the copy was made (so no other writer comes in between, and
/// readers — in WAL mode, or processes that have the file open — see either
/// the whole batch or none of it); with `--out`, the copy is renamed to that
/// path instead.
#if canImport(Glibc)
  import Glibc
#endif

/// The request shapes `fanout prefs apply --format` reads.
public enum SourceFormat: String, Sendable, CaseIterable {
  case stream, sendbird, easemob, suprsend, tdlib
}

public struct ApplyOptions: Sendable {
  public var snapshot: String
  public var format: SourceFormat
  /// Client-side use: entries may omit the user, and may not name another.
  public var asUser: String?
  /// Unix ms that durations (Easemob DND duration, TDLib mute_for) count from.
  public var now: Int64
  /// The changes file, or - for standard input.
  public var changes: String
  /// Where to write the result; nil: change `snapshot` in place.
  public var out: String?
  /// How long to wait for another writer holding the snapshot.
  public var busyTimeoutMilliseconds = SnapshotLoader.defaultBusyTimeoutMilliseconds
  /// Told each step as it starts (for a progress line).
  public var step: (@Sendable (String) -> Void)?

  public init(
    snapshot: String, format: SourceFormat, asUser: String?, now: Int64, changes: String,
    out: String?
  ) {
    self.snapshot = snapshot
    self.format = format
    self.asUser = asUser
    self.now = now
    self.changes = changes
    self.out = out
  }
}

/// Why a batch was not applied. Nothing was written in any case.
public enum ApplyError: Error, CustomStringConvertible {
  case snapshot(SnapshotError)
  case unreadable(path: String, reason: String)
  /// The changes are not the format's JSON; `path` locates the value.
  case malformed(path: String, reason: String)
  /// Entry `number` (1-based) was refused.
  case entry(number: Int, reason: String)
  /// The result would not be a valid snapshot.
  case result(SnapshotError)
  case write(path: String, reason: String)
  case usage(String)

  public var exitStatus: ExitStatus {
    switch self {
    case .usage: .usage
    case .snapshot(let e): e.exitStatus
    case .malformed, .entry, .result: .dataError
    case .unreadable: .noInput
    case .write: .cannotCreate
    }
  }

  public var description: String {
    switch self {
    case .snapshot(let e): e.description
    case .unreadable(let path, let reason): "cannot read changes from '\(path)': \(reason)"
    case .malformed(let path, let reason): "changes refused: \(path): \(reason)"
    case .entry(let n, let reason): "changes refused: entry \(n): \(reason)"
    case .result(let e): "changes refused: the result would not be a valid snapshot: \(e)"
    case .write(let path, let reason): "cannot write '\(path)': \(reason)"
    case .usage(let text): text
    }
  }
}

public struct ApplyReport: Sendable {
  public var entries: Int
  public var path: String
  /// Rows inserted, updated or deleted, per table, sorted by table.
  public var changedRows: [(table: String, rows: Int)]
}

public enum PrefsApply {
  public static func run(_ options: ApplyOptions) throws(ApplyError) -> ApplyReport {
    if options.format == .tdlib && options.asUser == nil {
      throw .usage("--format tdlib needs --as-user: TDLib requests carry no user id")
    }
    let destination = options.out ?? options.snapshot
    let inPlace = options.out == nil
    do { try SnapshotLoader.checkFile(options.snapshot) } catch { throw .snapshot(error) }
    // Batches for one file take turns, so that none is lost to another's write.
    let lock = try Lock(sidecarOf: destination)
    defer { lock.release() }
    let data = try readChanges(options.changes)
    // In place: the write transaction first, so that the state copied,
    // checked and then changed is the one committed last.
    let target: SnapshotEditor?
    do {
      target =
        inPlace
        ? try SnapshotEditor(
          path: options.snapshot, busyTimeoutMilliseconds: options.busyTimeoutMilliseconds) : nil
    } catch {
      throw .snapshot(
        SnapshotError.writing(
          options.snapshot, error, waited: options.busyTimeoutMilliseconds))
    }
    let index: Index
    options.step?("loading the snapshot")
    do {
      index = try SnapshotLoader.load(
        path: options.snapshot, busyTimeoutMilliseconds: options.busyTimeoutMilliseconds
      ).index
    } catch {
      throw .snapshot(error)
    }
    let partial = sidecar(of: destination, suffix: ".partial")
    unlink(partial)
    // Removed however this ends, with the journal a failed write leaves
    // beside it: by the defer, or by the cleanup if a signal ends the run.
    let removePartial: @Sendable () -> Void = {
      for suffix in ["", "-journal"] { unlink(partial + suffix) }
    }
    let cleanup = CleanupOnSignal.register(removePartial)
    defer {
      removePartial()
      CleanupOnSignal.withdraw(cleanup)
    }
    options.step?("copying it")
    do {
      try copySnapshot(
        from: options.snapshot, to: partial,
        busyTimeoutMilliseconds: SnapshotLoader.defaultBusyTimeoutMilliseconds)
    } catch {
      throw .write(path: partial, reason: error.message)
    }
    let copy: SnapshotEditor
    do { copy = try SnapshotEditor(path: partial) } catch {
      throw ApplyError.write(path: partial, reason: error.message)
    }
    options.step?("applying the changes to the copy")
    let entries = try apply(data, options, index: index, to: copy)
    do { try copy.commit() } catch {
      throw ApplyError.write(path: partial, reason: error.message)
    }
    options.step?("checking the result")
    do { _ = try SnapshotLoader.load(path: partial) } catch { throw .result(error) }
    if let target {
      options.step?("applying the changes in place")
      // The same entries on the same state give the same rows.
      _ = try apply(data, options, index: index, to: target)
      do { try target.commit() } catch {
        throw .write(path: options.snapshot, reason: error.message)
      }
    } else {
      try replace(destination, with: partial)
    }
    return ApplyReport(
      entries: entries, path: destination,
      changedRows: copy.changedRows.sorted { $0.key < $1.key }.map { ($0.key, $0.value) })
  }

  /// Applies every entry through `editor`; returns how many there were.
  /// The context (and the snapshot reader it holds) ends here, before the
  /// editor commits: in rollback-journal mode a reader still open would keep
  /// the commit waiting.
  private static func apply(
    _ data: Data, _ options: ApplyOptions, index: Index, to editor: SnapshotEditor
  ) throws(ApplyError) -> Int {
    let context = try ApplyContext(
      index: index, editor: editor, asUser: options.asUser, now: options.now)
    return try options.format.apply(data, context)
  }

  /// The most changes read at once: a batch larger than this is refused
  /// rather than read (from /dev/zero, for ever).
  static let maxChangesBytes = 256 << 20

  private static func readChanges(_ path: String) throws(ApplyError) -> Data {
    let fd: Int32
    do {
      fd = path == "-" ? STDIN_FILENO : try systemCall("open") { open(path, O_RDONLY | O_CLOEXEC) }
    } catch {
      throw .unreadable(path: path, reason: error.reason)
    }
    defer { if fd != STDIN_FILENO { close(fd) } }
    let bytes: [UInt8]?
    do { bytes = try readToEnd(fd, limit: maxChangesBytes) } catch {
      throw .unreadable(path: path, reason: error.reason)
    }
    guard let bytes else {
      throw .unreadable(
        path: path, reason: "larger than \(maxChangesBytes >> 20) MiB; apply it in batches")
    }
    return Data(bytes)
  }

  /// `.NAME<suffix>` next to `path` (the rename then stays in one file system).
  static func sidecar(of path: String, suffix: String) -> String {
    guard let slash = path.lastIndex(of: "/") else { return ".\(path)\(suffix)" }
    return String(path[...slash]) + "." + String(path[path.index(after: slash)...]) + suffix
  }

  /// An exclusive `flock` on `.NAME.lock` next to the file being replaced:
  /// a stable file, unlike the snapshot itself, whose inode each batch replaces.
  struct Lock {
    let fd: Int32

    init(sidecarOf path: String) throws(ApplyError) {
      let lockPath = PrefsApply.sidecar(of: path, suffix: ".lock")
      do { fd = try openLockFile(lockPath) } catch {
        throw .write(path: lockPath, reason: error.description)
      }
      let fd = fd
      do { _ = try systemCall("flock") { flock(fd, LOCK_EX) } } catch {
        close(fd)
        throw .write(path: lockPath, reason: error.description)
      }
    }

    func release() { close(fd) }
  }

  /// Syncs the finished copy and renames it over `destination`.
  private static func replace(_ destination: String, with partial: String) throws(ApplyError) {
    do {
      let fd = try systemCall("open") { open(partial, O_RDONLY | O_CLOEXEC) }
      defer { close(fd) }
      _ = try systemCall("fsync") { fsync(fd) }
    } catch {
      throw .write(path: partial, reason: error.description)
    }
    do { _ = try systemCall("rename") { rename(partial, destination) } } catch {
      throw .write(path: destination, reason: error.description)
    }
  }
}

extension SourceFormat {
  /// Decodes and applies every entry in order; returns the number applied.
  func apply(_ data: Data, _ context: ApplyContext) throws(ApplyError) -> Int {
    switch self {
    case .stream: try StreamChanges.apply(data, context)
    case .sendbird: try SendbirdChanges.apply(data, context)
    case .easemob: try EasemobChanges.apply(data, context)
    case .suprsend: try SuprSendChanges.apply(data, context)
    case .tdlib: try TDLibChanges.apply(data, context)
    }
  }
}
