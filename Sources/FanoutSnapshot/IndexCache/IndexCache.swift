import Dispatch
import FanoutIndex
import FanoutModel
import FanoutTime
import Synchronization

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// A folder of compiled snapshots, one per snapshot state
/// (`SnapshotFingerprint`), that loads fill and use: a snapshot loaded
/// before is read back instead of being loaded from SQLite again.
///
/// A file that is stale, cut short, corrupt or damaged (checked whole before
/// use) is reported in one log line and replaced — never trusted. Nor is a
/// folder or file another user could have written: the folder must be this
/// user's own, a real folder that no one else can write, under parents that
/// no one else can change (as ssh treats `~/.ssh`); files are written 0600
/// and read only when they are this user's, not through a link. Otherwise
/// the cache is not used, with one warning line. The folder is kept under `limitBytes` by
/// removing the least recently used files. The cache only ever saves time:
/// when it cannot be read or written the load goes on without it.
public struct IndexCache: Sendable {
  public let directory: String
  public let limitBytes: Int64
  /// Where problems with cached files are told (one line each).
  let log: @Sendable (String) -> Void

  public static let defaultLimitBytes: Int64 = 4 << 30

  public init(
    directory: String, limitBytes: Int64 = defaultLimitBytes,
    log: @escaping @Sendable (String) -> Void = IndexCache.logToStandardError
  ) {
    self.directory = directory
    self.limitBytes = limitBytes
    self.log = log
  }

  /// `$XDG_CACHE_HOME/fanout`, else `$HOME/.cache/fanout`; nil without either.
  public static func defaultDirectory() -> String? {
    if let xdg = getenv("XDG_CACHE_HOME").map({ String(cString: $0) }), xdg.hasPrefix("/") {
      return xdg + "/fanout"
    }
    guard let home = getenv("HOME").map({ String(cString: $0) }), !home.isEmpty else { return nil }
    return home + "/.cache/fanout"
  }

  public static let logToStandardError: @Sendable (String) -> Void = { line in
    var bytes = Array("fanout: \(Printable.text(line, keepingLines: false))\n".utf8)
    _ = bytes.withUnsafeMutableBytes { write(STDERR_FILENO, $0.baseAddress, $0.count) }
  }

  /// The cached compiled snapshot of state `fingerprint`, if there is a good one.
  func snapshot(for fingerprint: SnapshotFingerprint, timeZones: TimeZoneDatabase) -> Snapshot? {
    guard folderIsTrusted() else { return nil }
    let path = directory + "/" + fingerprint.fileName
    let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
    guard fd >= 0 else {
      if errno != ENOENT { warnOnce("index cache: \(path) is not used: \(lastError())") }
      return nil
    }
    defer { close(fd) }
    var st = stat()
    guard fstat(fd, &st) == 0, st.st_mode & S_IFMT == S_IFREG, st.st_uid == geteuid(),
      st.st_mode & 0o022 == 0
    else {
      warnOnce("index cache: \(path) is not used: not a file of this user's that only it can write")
      return nil
    }
    do throws(IndexFileError) {
      let snapshot = try CompiledSnapshot.read(
        fd: fd, timeZones: timeZones, accepts: { $0 == fingerprint.words })
      // Marks it recently used: eviction goes by modification time.
      utimensat(AT_FDCWD, path, nil, 0)
      return snapshot
    } catch {
      log("index cache: \(path) is not usable (\(error.reason)); rebuilding it")
      unlink(path)
      return nil
    }
  }

  /// Cache files being written aside (`storeAside`). The process waits
  /// for them as it exits (`atexit`), so that even a short command leaves
  /// its file; one killed meanwhile leaves a `.partial` file, which `trim`
  /// removes an hour later.
  private static let writesAside = DispatchGroup()
  private static let waitForWritesAtExit: Void = {
    atexit { IndexCache.writesAside.wait() }
  }()
  private static let writer = DispatchQueue(label: "fanout.index-cache")

  /// `store`, on a thread of its own, so that the run goes on meanwhile
  /// (writing 740 MB for a 1M-user snapshot takes seconds, mostly waiting
  /// for the disk: the page cache throttles a writer of that much).
  func storeAside(_ snapshot: Snapshot, fingerprint: SnapshotFingerprint) {
    _ = Self.waitForWritesAtExit
    Self.writesAside.enter()
    Self.writer.async {
      store(snapshot, fingerprint: fingerprint)
      Self.writesAside.leave()
    }
  }

  /// Waits for the cache files being written aside.
  package static func waitForWritesAside() { writesAside.wait() }

  /// Caches `snapshot`, loaded from state `fingerprint`, then trims the
  /// folder (only ever aside: `storeAside`).
  private func store(_ snapshot: Snapshot, fingerprint: SnapshotFingerprint) {
    guard makeDirectory(), folderIsTrusted(), freeBytes() > 1 << 30 else { return }
    do throws(SystemCallError) {
      try CompiledSnapshot.write(
        snapshot, key: fingerprint.words, to: directory + "/" + fingerprint.fileName, mode: 0o600)
    } catch {
      return  // a full disk or a folder made read-only: the run goes on without it
    }
    trim()
  }

  private func makeDirectory() -> Bool {
    var path = directory.hasPrefix("/") ? "" : "."
    for part in directory.split(separator: "/") {
      path += "/" + part
      if mkdir(path, 0o700) != 0 && errno != EEXIST { return false }
    }
    return access(directory, W_OK) == 0
  }

  /// Whether the folder is one only this user can have written: a real
  /// folder (not a link) owned by the effective user and writable by no
  /// one else, whose parents are each this user's or root's and writable
  /// by no one else unless sticky (like /tmp: others cannot rename what is
  /// not theirs there). Warns once when it is not.
  func folderIsTrusted() -> Bool {
    var st = stat()
    guard lstat(directory, &st) == 0 else { return false }  // absent: nothing to read
    let me = geteuid()
    guard st.st_mode & S_IFMT == S_IFDIR, st.st_uid == me, st.st_mode & 0o022 == 0 else {
      warnOnce(
        "index cache: '\(directory)' is not used: it must be a folder of this user's (uid \(me)) "
          + "that no one else can write, not a link (chmod 700 it, or pass --index-cache DIR)")
      return false
    }
    var parent = directory.hasPrefix("/") ? directory : "./" + directory
    while let slash = parent.lastIndex(of: "/"), slash != parent.startIndex {
      parent = String(parent[..<slash])
      guard stat(parent, &st) == 0, st.st_uid == me || st.st_uid == 0,
        st.st_mode & 0o022 == 0 || st.st_mode & S_ISVTX != 0
      else {
        warnOnce(
          "index cache: '\(directory)' is not used: its parent '\(parent)' can be changed by "
            + "another user")
        return false
      }
    }
    return true
  }

  private static let warned = Mutex(false)

  private func warnOnce(_ line: String) {
    guard
      !Self.warned.withLock({ warned in
        defer { warned = true }
        return warned
      })
    else { return }
    log(line)
  }

  private func lastError() -> String { String(cString: strerror(errno)) }

  private func freeBytes() -> Int64 {
    var fs = statvfs()
    guard statvfs(directory, &fs) == 0 else { return 0 }
    return Int64(fs.f_bavail) &* Int64(fs.f_frsize)
  }

  /// Whether `name` is a cache file's (`SnapshotFingerprint.fileName`: 32
  /// hex digits, then `.fanout-index`). Trimming removes no other: the
  /// folder may be the user's own (`--index-cache DIR`), holding files
  /// `snapshot compile --out` wrote, or anything else.
  static func isCacheFile<Name: StringProtocol>(_ name: Name) -> Bool {
    guard name.hasSuffix(".fanout-index") else { return false }
    let stem = name.utf8.dropLast(".fanout-index".utf8.count)
    return stem.count == 32
      && stem.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
  }

  /// Whether `name` is a cache file being written aside, or left so by a
  /// run that died writing it: `.NAME.PID.MS.partial` (`CompiledSnapshot.write`).
  static func isPartialCacheFile(_ name: String) -> Bool {
    guard name.hasPrefix("."), name.hasSuffix(".partial") else { return false }
    let parts = name.dropFirst().dropLast(".partial".count).split(
      separator: ".", omittingEmptySubsequences: false)
    return parts.count == 4 && isCacheFile(parts[0] + "." + parts[1])
      && parts[2...].allSatisfy { !$0.isEmpty && $0.utf8.allSatisfy { (0x30...0x39).contains($0) } }
  }

  /// Removes the least recently used cache files while the folder holds
  /// more than `limitBytes`, and those left aside by runs that died writing.
  func trim() {
    guard let dir = opendir(directory) else { return }
    var files: [(name: String, size: Int64, used: Int64)] = []
    let now = WallClock.nowMillis() / 1000
    for name in folderEntryNames(dir) {
      var st = stat()
      guard lstat(directory + "/" + name, &st) == 0, st.st_mode & S_IFMT == S_IFREG else {
        continue
      }
      if Self.isPartialCacheFile(name) {
        if now &- Int64(st.st_mtim.tv_sec) > 3600 { unlink(directory + "/" + name) }
      } else if Self.isCacheFile(name) {
        files.append((name, Int64(st.st_size), Int64(st.st_mtim.tv_sec)))
      }
    }
    var total = files.reduce(0) { $0 + $1.size }
    for file in files.sorted(by: { $0.used < $1.used }) where total > limitBytes {
      unlink(directory + "/" + file.name)
      total -= file.size
    }
  }
}
