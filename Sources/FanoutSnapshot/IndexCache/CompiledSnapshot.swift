import FanoutIndex
import FanoutModel
import FanoutTime

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// A validated snapshot compiled to one file (`IndexFile`): the state it
/// was compiled from (`SnapshotFingerprint.words`), what `snapshot check`
/// prints, and the index. Reading one maps the file: the index's columns
/// are its pages.
enum CompiledSnapshot {
  /// Writes `snapshot`, compiled from the state `key`, aside in `directory`
  /// and renames it to `path` once complete, with permissions `mode` (the
  /// file holds every device token: never wider than the snapshot's own).
  static func write(_ snapshot: Snapshot, key: [Int64], to path: String, mode: mode_t)
    throws(SystemCallError)
  {
    let slash = path.lastIndex(of: "/")
    let directory = slash.map { String(path[..<$0]) } ?? "."
    let name = slash.map { String(path[path.index(after: $0)...]) } ?? path
    // Unique, so that processes compiling the same snapshot never share one.
    let partial = "\(directory)/.\(name).\(getpid()).\(WallClock.nowMillis()).partial"
    let (fd, cleanup) = try CleanupOnSignal.make(
      { () throws(SystemCallError) in
        try systemCall("open") {
          open(partial, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0o600)
        }
      }, undoneBy: { _ in unlink(partial) })
    var done = false
    defer {
      close(fd)
      if !done { unlink(partial) }
      CleanupOnSignal.withdraw(cleanup)
    }
    _ = try systemCall("fchmod") { fchmod(fd, mode) }
    var file = try IndexFileWriter(fd: fd)
    try file.write(key)
    let info = snapshot.info
    try file.write(info.rowCounts.map(\.table).joined(separator: "\n"))
    try file.write(info.rowCounts.map { Int64($0.rows) })
    try file.write(info.timeZones.joined(separator: "\n"))
    try file.write(info.devicesPerGateway.map(\.gateway).joined(separator: "\n"))
    try file.write(info.devicesPerGateway.map { Int64($0.devices) })
    try file.write([Int64(info.dndPatterns), Int64(info.snoozeGroups)])
    try snapshot.index.write(to: &file)
    try file.finish()
    _ = try systemCall("rename") { rename(partial, path) }
    done = true
  }

  /// Reads the compiled snapshot at `path` if it was compiled from a state
  /// `accepts` (given its key); nil when there is no such file.
  static func read(
    _ path: String, timeZones: TimeZoneDatabase, accepts: ([Int64]) -> Bool
  ) throws(IndexFileError) -> Snapshot? {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else {
      if errno == ENOENT { return nil }
      throw IndexFileError(SystemCallError(call: "open", code: errno).description)
    }
    defer { close(fd) }
    return try read(fd: fd, timeZones: timeZones, accepts: accepts)
  }

  /// `read(_:timeZones:accepts:)` from a file already open on `fd`.
  static func read(
    fd: Int32, timeZones: TimeZoneDatabase, accepts: ([Int64]) -> Bool
  ) throws(IndexFileError) -> Snapshot {
    var file = try IndexFileReader(fd: fd)
    guard accepts(try file.read(Int64.self)) else {
      throw IndexFileError(
        "compiled by another build of fanout or from another state of the snapshot; compile it again"
      )
    }
    func lines() throws(IndexFileError) -> [String] {
      let text = try file.readString()
      return text.isEmpty
        ? []
        : text.split(separator: "\n", omittingEmptySubsequences: false).map(
          String.init)
    }
    var info = SnapshotInfo()
    let tables = try lines()
    let rows: [Int64] = try file.read()
    info.timeZones = try lines()
    let gateways = try lines()
    let devices: [Int64] = try file.read()
    let counts: [Int64] = try file.read()
    guard tables.count == rows.count, gateways.count == devices.count, counts.count == 2 else {
      throw IndexFileError("the snapshot description does not agree in length")
    }
    info.rowCounts = zip(tables, rows.map { Int($0) }).map { ($0, $1) }
    info.devicesPerGateway = zip(gateways, devices.map { Int($0) }).map { ($0, $1) }
    (info.dndPatterns, info.snoozeGroups) = (Int(counts[0]), Int(counts[1]))
    let index = try Index(reading: &file) { try? timeZones.zone(named: $0) }
    try file.finish()
    return Snapshot(index: index, info: info)
  }

  /// Whether the file at `path` starts like a compiled index.
  static func isCompiled(_ path: String) -> Bool {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return false }
    defer { close(fd) }
    var magic = [UInt8](repeating: 0, count: 8)
    let read = magic.withUnsafeMutableBytes { pread(fd, $0.baseAddress, 8, 0) }
    return read == 8 && magic == IndexFile.magic
  }
}
