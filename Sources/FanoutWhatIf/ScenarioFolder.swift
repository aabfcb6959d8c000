import FanoutModel
import FanoutTime

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// The private folder a scenario's snapshot is made in
/// (`$TMPDIR/fanout-whatif-XXXXXX`), locked (`flock` on the folder) for as
/// long as its run lives. A run killed outright (SIGKILL, a crash) leaves
/// its folder — 64 MB for a quiet-hours scenario at 1M users — and no
/// cleanup of ours ran; the lock tells the next run's `removeAbandoned`
/// that nobody uses it any more.
struct ScenarioFolder: Sendable {
  static let prefix = "fanout-whatif-"
  /// The files a scenario's folder may hold: its snapshot and SQLite's
  /// companions. A folder holding anything else is not removed.
  private static let fileNames = ["", "-journal", "-wal", "-shm"].map { "scenario.sqlite" + $0 }
  /// A folder younger than this is not judged: its run may not have taken
  /// its lock yet (between `mkdtemp` and `flock`).
  static let minimumAgeSeconds = 60

  /// Where scenarios' folders are made: `$TMPDIR`, else /tmp.
  static var temporary: String { getenv("TMPDIR").map { String(cString: $0) } ?? "/tmp" }

  let path: String
  /// Where the scenario's snapshot is made.
  var snapshotPath: String { path + "/" + Self.fileNames[0] }
  /// Open on the folder, holding its lock; closed by `remove`.
  private let fd: Int32

  /// Makes and locks a new folder in `temporary`.
  static func make(in temporary: String) throws(SystemCallError) -> ScenarioFolder {
    var template = Array((temporary + "/" + prefix + "XXXXXX").utf8CString)
    guard let made = mkdtemp(&template) else { throw SystemCallError(call: "mkdtemp", code: errno) }
    let path = String(cString: made)
    let fd: Int32
    do {
      fd = try systemCall("open") { open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) }
    } catch {
      rmdir(path)
      throw error
    }
    do {
      _ = try systemCall("flock") { flock(fd, LOCK_EX) }
    } catch {
      close(fd)
      rmdir(path)
      throw error
    }
    return ScenarioFolder(path: path, fd: fd)
  }

  /// Removes the scenario's snapshot, to be made again.
  func removeSnapshot() {
    for name in Self.fileNames { unlink(path + "/" + name) }
  }

  /// Removes the scenario's files and the folder, and lets go of its lock.
  func remove() {
    removeSnapshot()
    rmdir(path)
    close(fd)
  }

  /// Removes the folders in `temporary` that runs of this user left when
  /// they were killed: a real folder (not a link) named like ours, owned by
  /// this user, unchanged for a minute, whose lock nobody holds, holding
  /// only a scenario's files. Anything else is left as it is.
  static func removeAbandoned(in temporary: String) {
    guard let listing = opendir(temporary) else { return }
    for name in folderEntryNames(listing, prefix: prefix)
    where name.utf8.count == prefix.utf8.count + 6 {
      removeIfAbandoned(temporary + "/" + name)
    }
  }

  private static func removeIfAbandoned(_ path: String) {
    var seen = stat()
    guard lstat(path, &seen) == 0, seen.st_mode & S_IFMT == S_IFDIR, seen.st_uid == geteuid(),
      WallClock.nowMillis() / 1000 &- Int64(seen.st_mtim.tv_sec) >= minimumAgeSeconds
    else { return }
    let fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
    guard fd >= 0 else { return }
    defer { close(fd) }
    var opened = stat()
    // The folder opened is the one judged, not another put in its place.
    guard fstat(fd, &opened) == 0, opened.st_dev == seen.st_dev, opened.st_ino == seen.st_ino,
      flock(fd, LOCK_EX | LOCK_NB) == 0
    else { return }
    guard holdsOnlyScenarioFiles(fd) else { return }
    // Through the folder's descriptor: a name swapped for a link meanwhile
    // removes the link, never what it points at.
    for name in fileNames { unlinkat(fd, name, 0) }
    rmdir(path)
  }

  /// Whether the folder open on `fd` holds nothing but a scenario's files.
  private static func holdsOnlyScenarioFiles(_ fd: Int32) -> Bool {
    let copy = dup(fd)
    guard copy >= 0, let listing = fdopendir(copy) else {
      if copy >= 0 { close(copy) }
      return false
    }
    return folderEntryNames(listing).allSatisfy(fileNames.contains)
  }
}
