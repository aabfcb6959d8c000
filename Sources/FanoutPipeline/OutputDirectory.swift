import FanoutModel
import FanoutOutput

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// An output folder held by one run (`eval`, `whatif` or `stream`) from
/// start to finish.
///
/// Claiming it creates the folder if needed and takes an exclusive `flock`
/// on a lock file inside it, `.fanout.lock`, holding the owner's pid; a
/// second run on the same folder is refused ("in use by pid N") before it
/// looks at, removes or writes anything. Only then is the folder checked:
/// a fresh run needs it empty, or with `overwrite` removes the files a
/// previous run wrote there. Releasing it (or the process ending) drops the
/// lock; a folder the claim created and the run left empty is removed again,
/// so a refused snapshot leaves no trace. What the run reads is never
/// removed: a claim whose `overwrite` would remove one of its inputs (an
/// earlier run's delivery file given to `audit --sent`, traffic named
/// `rejected.ndjson`), or whose folder is an input folder (`merge` into a
/// shard's), is refused instead.
package final class OutputFolder {
  /// How a run treats what it finds in the folder.
  package enum Mode {
    /// `eval`, `whatif`: the folder must be empty, or with `overwrite` a
    /// previous run's files are removed first.
    /// `outputs` says which files a previous run wrote (and `overwrite` removes).
    case fresh(overwrite: Bool, outputs: (String) -> Bool = OutputFolder.isRunOutput)
    /// `stream`: the folder's segments are kept and continued.
    case resume
  }

  package static let lockName = ".fanout.lock"

  package let path: String
  private var lock: Int32
  private let created: Bool
  /// Removes the lock file (and the folder if this claim created it) if a
  /// signal ends the run (`CleanupOnSignal`).
  private var cleanup: Int

  /// A file or folder the run reads, and the option that names it.
  package struct Input {
    package var option: String
    package var path: String

    package init(_ option: String, _ path: String) {
      self.option = option
      self.path = path
    }
  }

  /// - Parameter inputs: what the run reads ("-" and paths that do not
  ///   exist are passed over).
  package init(claiming path: String, mode: Mode, inputs: [Input] = []) throws(PipelineError) {
    guard !path.allSatisfy({ $0 == " " || $0 == "\t" || $0 == "\n" }) else {
      throw .usage("the output folder path is empty")
    }
    if let refusal = standardOutputRefusal("--out", path, kind: "folder") { throw .usage(refusal) }
    self.path = path
    var st = stat()
    let exists = stat(path, &st) == 0
    // (Followed through links, as the run opens them.)
    let read = inputs.compactMap { input -> (Input, FileIdentity)? in
      guard input.path != "-", let file = FileIdentity(path: input.path) else { return nil }
      return (input, file)
    }
    if exists {
      guard (st.st_mode & S_IFMT) == S_IFDIR else {
        throw .usage("output path '\(path)' is not a folder")
      }
      let folder = FileIdentity(path: path)
      if let (input, _) = read.first(where: { $0.1 == folder }) {
        throw .usage(
          "output folder '\(path)' is one this run reads (\(input.option) '\(input.path)'): "
            + "write to another folder")
      }
    } else {
      let code = errno
      guard code == ENOENT else {
        throw .usage("output folder '\(path)': \(String(cString: strerror(code)))")
      }
    }
    created = !exists
    // The folder and the lock file are made together with the cleanup that
    // removes them (it once left the lock file behind).
    (lock, cleanup) = try CleanupOnSignal.make(
      { () throws(PipelineError) in
        if !exists { try Self.create(path) }
        return try Self.lock(path + "/" + Self.lockName, folder: path)
      },
      undoneBy: { _ in
        unlink(path + "/" + Self.lockName)
        if !exists { rmdir(path) }
      })
    do {
      if case .fresh(let overwrite, let outputs) = mode {
        try prepare(overwrite: overwrite, outputs: outputs, reading: read)
      }
    } catch {
      release()
      throw error
    }
  }

  deinit { release() }

  /// Drops the lock (removing the lock file first, so that the next run
  /// creates its own) and removes the folder if this claim created it and
  /// it is empty.
  package func release() {
    guard lock >= 0 else { return }
    // With the cleanup withdrawn, a signal must not land before the lock
    // file is gone: it waits.
    CleanupOnSignal.commit {
      CleanupOnSignal.withdraw(cleanup)
      unlink(path + "/" + Self.lockName)
      close(lock)
      lock = -1
      if created { rmdir(path) }  // fails, harmlessly, unless empty
    }
  }

  /// The folder's entries other than the lock file, sorted.
  package func entries() throws(PipelineError) -> [String] {
    guard let dir = opendir(path) else {
      let failure = SystemCallError(call: "opendir", code: errno)
      throw .usage("output folder '\(path)' cannot be read: \(failure.reason)")
    }
    return folderEntryNames(dir).filter { $0 != Self.lockName }.sorted()
  }

  private func prepare(
    overwrite: Bool, outputs: (String) -> Bool, reading inputs: [(Input, FileIdentity)]
  ) throws(PipelineError) {
    let names = try entries()
    if !overwrite {
      guard names.isEmpty else {
        let left = names.filter { $0.hasPrefix(".") && $0.hasSuffix(".partial") }
        let shown = names.prefix(4).joined(separator: ", ") + (names.count > 4 ? ", …" : "")
        throw .usage(
          "output folder '\(path)' is not empty: it holds \(shown)"
            + (left.isEmpty
              ? " (use --overwrite to replace a previous run's files)"
              : " (partial files of a run that was killed; --overwrite removes them)"))
      }
      return
    }
    let removed = names.filter(outputs)
    // Checked whole before anything is removed. (A link to an input is
    // removed as any other file: its target stays.)
    for name in removed {
      let file = FileIdentity(path: path + "/" + name, followingLinks: false)
      guard let (input, _) = inputs.first(where: { $0.1 == file }) else { continue }
      throw .usage(
        "--overwrite would remove '\(path)/\(name)', which this run reads (\(input.option) "
          + "'\(input.path)'): write to another folder")
    }
    for name in removed {
      let file = path + "/" + name
      do { _ = try systemCall("unlink") { unlink(file) } } catch {
        throw .usage("cannot remove '\(file)': \(error.reason)")
      }
    }
  }

  /// Whether `name` is a file a run writes (`eval`, `whatif`, `audit`,
  /// `merge`), or a partial one it left.
  package static func isRunOutput(_ name: String) -> Bool {
    func isFinal(_ name: String) -> Bool {
      name.hasSuffix(".ndjson.lz4") || outputNames.contains(name)
    }
    return isFinal(name) || isPartial(name, of: isFinal)
  }

  private static let outputNames: Set<String> = [
    "rejected.ndjson", "summary.json", "report.json", "report.html", "audit.json",
    "unreadable.ndjson",
  ]

  /// Whether `name` is a partial file (`.NAME.partial`, `PendingFile`) of a
  /// NAME `output` accepts: only those a run of ours left are removed, not
  /// another program's in the same folder.
  package static func isPartial(_ name: String, of output: (String) -> Bool) -> Bool {
    name.hasPrefix(".") && name.hasSuffix(".partial")
      && output(String(name.dropFirst().dropLast(".partial".count)))
  }

  /// Opens and locks the lock file, writing this process's pid into it.
  /// The file locked must still be the one at `lockPath` (a run that ends
  /// removes its lock file; one that opened it just before must not go on
  /// holding a lock on a removed file), so a lock on a file that is gone is
  /// given up and taken again.
  private static func lock(_ lockPath: String, folder: String) throws(PipelineError) -> Int32 {
    for _ in 0..<100 {
      let fd: Int32
      do { fd = try openLockFile(lockPath) } catch {
        switch error {
        case .notPlain:
          throw .output(OutputError(path: lockPath, reason: "the lock file: \(error)"))
        case .system(let failure):
          throw .usage(
            "cannot create the lock file in output folder '\(folder)': \(failure.reason)")
        }
      }
      if flock(fd, LOCK_EX | LOCK_NB) != 0 {
        let code = errno
        let holder = readPID(fd)
        close(fd)
        guard code == EWOULDBLOCK else {
          throw .usage("cannot lock output folder '\(folder)': \(String(cString: strerror(code)))")
        }
        throw .usage(
          "output folder '\(folder)' is in use by "
            + (holder.map { "pid \($0)" } ?? "another run") + " (one run per folder)")
      }
      var held = stat()
      var named = stat()
      if fstat(fd, &held) == 0 && stat(lockPath, &named) == 0 && held.st_ino == named.st_ino
        && held.st_dev == named.st_dev
      {
        let pid = Array("\(getpid())\n".utf8)
        _ = ftruncate(fd, 0)
        _ = pid.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
        return fd
      }
      close(fd)  // released and removed meanwhile: try again on the new file
    }
    throw .usage("cannot lock output folder '\(folder)': its lock file keeps changing")
  }

  private static func readPID(_ fd: Int32) -> Int? {
    var buffer = [UInt8](repeating: 0, count: 32)
    let n = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
    guard n > 0 else { return nil }
    return Int(String(decoding: buffer[0..<n], as: UTF8.self).filter { $0.isNumber })
  }

  /// Creates the folder and its missing parents.
  private static func create(_ path: String) throws(PipelineError) {
    var prefix = path.hasPrefix("/") ? "/" : ""
    for part in path.split(separator: "/") {
      prefix += part + "/"
      let folder = prefix
      do { _ = try systemCall("mkdir") { mkdir(folder, 0o755) } } catch  where error.code != EEXIST
      {
        throw .usage("cannot create output folder '\(path)': \(error.reason)")
      } catch {}
    }
  }
}
