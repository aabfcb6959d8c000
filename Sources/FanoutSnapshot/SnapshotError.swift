import FanoutIndex
import FanoutModel
import FanoutSQLite

#if canImport(Glibc)
  import Glibc
#endif

/// Why a snapshot was refused: the table, the offending row's key and the
/// column, as far as they are known, and what is wrong.
public struct SnapshotError: Error, CustomStringConvertible, Equatable {
  public let table: String?
  public let key: String?
  public let column: String?
  public let reason: String
  /// The snapshot could not be read now (a writer holds it locked): a
  /// temporary condition, worth trying again, not a fault of the file.
  public let busy: Bool
  /// The path cannot be opened as a file at all (missing, a folder, a FIFO
  /// or device, no permission): like unreadable messages, exit 66.
  public let unreadable: Bool
  /// The SQLite failure behind the refusal, if one was: its result code and
  /// the SQL that failed.
  public let sqlite: SQLiteError?

  public init(
    table: String? = nil, key: String? = nil, column: String? = nil, reason: String,
    sqlite: SQLiteError? = nil
  ) {
    self.table = table
    self.key = key
    self.column = column
    self.reason = reason
    self.sqlite = sqlite
    busy = false
    unreadable = false
  }

  /// The path at `path` cannot be opened as a snapshot file, for `reason`.
  public init(unreadable reason: String) {
    table = nil
    key = nil
    column = nil
    self.reason = reason
    busy = false
    unreadable = true
    sqlite = nil
  }

  /// The snapshot is busy for `reason`: worth trying again.
  public init(busy path: String, reason: String) {
    table = nil
    key = nil
    column = nil
    self.reason = "'\(path)': " + reason
    busy = true
    unreadable = false
    sqlite = nil
  }

  /// The snapshot stayed locked by a writer for all of `waited` milliseconds.
  public init(busy path: String, waited milliseconds: Int) {
    table = nil
    key = nil
    column = nil
    reason =
      "'\(path)' is locked by a writer; gave up after waiting \(milliseconds) ms (--busy-timeout)"
    busy = true
    unreadable = false
    sqlite = nil
  }

  /// Busy is worth trying again; a refusal is not.
  public var exitStatus: ExitStatus { busy ? .tryAgain : unreadable ? .noInput : .dataError }

  public var description: String {
    var parts: [String] = []
    if let table { parts.append("table \(table)") }
    if let key { parts.append("row \(key)") }
    if let column { parts.append("column \(column)") }
    return (busy ? "snapshot busy: " : unreadable ? "snapshot unreadable: " : "snapshot refused: ")
      + (parts.isEmpty ? "" : parts.joined(separator: ", ") + ": ")
      + reason + (sqlite.map { " (SQLite result code \($0.code))" } ?? "")
  }
}

extension SnapshotError {
  /// Two rows for one (channel, user) pair; `key` packs `channel << 32 | user`.
  static func duplicatePair(in table: String, key: UInt64, channels: BytePool, users: StringTable)
    -> SnapshotError
  {
    let channel = channels.string(Int(key >> 32))
    let user = users[Int(UInt32(truncatingIfNeeded: key))]
    return SnapshotError(
      table: table, key: "channel_id=\(Bounded.quoted(channel)), user_id=\(Bounded.quoted(user))",
      reason: "duplicate key")
  }
}

extension SnapshotError {
  /// What is wrong with the path itself, in plain words, before SQLite is
  /// asked: missing, a folder, not a regular file (a FIFO would block the
  /// open for ever, a device read as garbage), unreadable — exit 66 — or
  /// an empty file (which SQLite would open as an empty database).
  package static func checkFile(_ path: String) throws(SnapshotError) {
    let shown = Bounded.quoted(path)
    var st = stat()
    guard stat(path, &st) == 0 else {
      let code = errno
      throw SnapshotError(unreadable: "cannot open \(shown): \(String(cString: strerror(code)))")
    }
    if (st.st_mode & S_IFMT) == S_IFDIR {
      throw SnapshotError(unreadable: "\(shown) is a folder, not a snapshot file")
    }
    guard (st.st_mode & S_IFMT) == S_IFREG else {
      throw SnapshotError(unreadable: "\(shown) is not a regular file (a FIFO, device or socket)")
    }
    if access(path, R_OK) != 0 {
      let code = errno
      throw SnapshotError(unreadable: "cannot read \(shown): \(String(cString: strerror(code)))")
    }
    if st.st_size == 0 {
      throw SnapshotError(reason: "'\(path)' is an empty file, not a SQLite database")
    }
  }

  /// Whether the database file's header says WAL mode (read and write
  /// versions 2, bytes 18 and 19).
  static func isWAL(_ path: String) -> Bool {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return false }
    defer { close(fd) }
    var header = [UInt8](repeating: 0, count: 20)
    let n = header.withUnsafeMutableBytes { pread(fd, $0.baseAddress, 20, 0) }
    return n == 20 && header[18] == 2 && header[19] == 2
  }

  /// A failure to open the snapshot for writing or to change it.
  @inline(never)
  public static func writing(_ path: String, _ error: SQLiteError, waited milliseconds: Int)
    -> SnapshotError
  {
    if error.isBusy { return SnapshotError(busy: path, waited: milliseconds) }
    return SnapshotError(reason: "cannot write '\(path)': \(error.message)", sqlite: error)
  }

  /// A failure to open or start reading the snapshot, with a hint where the
  /// cause is known.
  /// A failure of `ConsistentReads` on the snapshot at `path`: a writer
  /// held it past the `waited` milliseconds, or `opening`'s.
  @inline(never)
  package static func reading(_ path: String, _ error: SQLiteError, waited: Int) -> SnapshotError {
    error.resultCode == .busyTimeout
      ? SnapshotError(busy: path, waited: waited) : opening(path, error)
  }

  @inline(never)
  package static func opening(_ path: String, _ error: SQLiteError) -> SnapshotError {
    if error.isBusy { return SnapshotError(busy: path, waited: 0) }
    var hint = ""
    let code = error.resultCode.primary
    if code == .notADatabase && CompiledSnapshot.isCompiled(path) {
      return SnapshotError(
        reason: "'\(path)' is a compiled index (fanout snapshot compile --out), not a SQLite "
          + "snapshot: explain, prefs, whatif --sql and snapshot split need the SQLite file",
        sqlite: error)
    }
    if (code == .readOnly || code == .cantOpen) && isWAL(path) {
      hint =
        " (the snapshot is in WAL mode: SQLite must create '\(path)-shm' beside it even"
        + " to read it, and this user cannot write that folder; make the folder writable,"
        + " or publish the snapshot in rollback-journal mode: PRAGMA journal_mode=DELETE)"
    }
    return SnapshotError(reason: "cannot read '\(path)': \(error.message)\(hint)", sqlite: error)
  }
}

/// Why `fanout snapshot compile` wrote nothing.
extension SnapshotError {
  public enum Compile: Error, CustomStringConvertible {
    case snapshot(SnapshotError)
    /// The compiled file could not be written where asked.
    case cannotWrite(String)

    public var exitStatus: ExitStatus {
      switch self {
      case .snapshot(let error): error.exitStatus
      case .cannotWrite: .cannotCreate
      }
    }

    public var description: String {
      switch self {
      case .snapshot(let error): error.description
      case .cannotWrite(let what): "cannot write \(what)"
      }
    }
  }
}
