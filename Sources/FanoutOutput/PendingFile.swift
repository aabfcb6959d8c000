/// FanoutOutput owns the bytes that leave the process: files that appear
/// under their final name only when complete (written aside, synced, then
/// renamed), LZ4 frames, and summary.json.
import FanoutModel

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// A failed file operation: the path, the call and the system's reason.
public struct OutputError: Error, CustomStringConvertible {
  public let path: String
  public let reason: String

  public init(path: String, reason: String) {
    self.path = path
    self.reason = reason
  }

  /// The error for a failed system call on `path`.
  @inline(never)
  public init(path: String, _ failure: SystemCallError) {
    self.init(path: path, reason: failure.description)
  }

  public var description: String { "cannot write '\(path)': \(reason)" }
}

/// A file written aside as `.NAME.partial` in its folder and renamed to NAME
/// by `commit()` (or, with others, by `PendingFile.commit(together:)`). Until
/// then — or after `discard()`, a failure or a crash — no file of that name
/// appears.
public final class PendingFile {
  public let path: String
  /// Where the file is written until `commit` (another writer, such as
  /// SQLite, may write it by this path).
  public let partialPath: String
  private var state: State

  private enum State {
    /// Being written through this descriptor.
    case open(Int32)
    /// Complete and on disk, still under the partial name.
    case synced
    /// Renamed to its final name.
    case published
    /// Removed.
    case discarded
  }

  public init(directory: String, name: String) throws(OutputError) {
    path = directory + "/" + name
    partialPath = directory + "/." + name + ".partial"
    unlink(partialPath)  // left over from a crashed run
    let partialPath = partialPath
    do {
      state = .open(
        try systemCall("open") { open(partialPath, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644) }
      )
    } catch {
      throw OutputError(path: partialPath, error)
    }
  }

  /// A file that is not published by the time it goes leaves nothing behind.
  deinit { discard() }

  public func write(_ bytes: [UInt8]) throws(OutputError) {
    var failure: OutputError?
    bytes.withUnsafeBytes { raw in
      do throws(OutputError) { try write(raw) } catch { failure = error }
    }
    if let failure { throw failure }
  }

  public func write(_ raw: UnsafeRawBufferPointer) throws(OutputError) {
    guard case .open(let fd) = state else {
      preconditionFailure("write to '\(partialPath)' after it was closed")
    }
    var done = 0
    while done < raw.count {
      do {
        done += try systemCall("write") {
          Glibc.write(fd, raw.baseAddress! + done, raw.count - done)
        }
      } catch {
        throw OutputError(path: partialPath, error)
      }
    }
  }

  /// Flushes the file to disk and closes it, still under its partial name.
  public func sync() throws(OutputError) {
    guard case .open(let fd) = state else { return }
    do { _ = try systemCall("fsync") { fsync(fd) } } catch {
      throw OutputError(path: partialPath, error)
    }
    state = .synced
    guard close(fd) == 0 else {
      throw OutputError(path: partialPath, SystemCallError(call: "close", code: errno))
    }
  }

  /// Syncs, closes and renames the file to its final name.
  public func commit() throws(OutputError) { try Self.commit(together: [self]) }

  /// Syncs every file, then renames them in order — so the last one's
  /// presence means all the others are there. If any step fails, the files
  /// already renamed are removed again and the rest discarded: either all
  /// appear under their final names or none does.
  public static func commit(together files: [PendingFile]) throws(OutputError) {
    do {
      for file in files { try file.sync() }
      for file in files { try file.publish() }
    } catch {
      for file in files { file.withdraw() }
      throw error
    }
  }

  private func publish() throws(OutputError) {
    guard case .synced = state else { return }
    let (from, to) = (partialPath, path)
    do { _ = try systemCall("rename") { rename(from, to) } } catch {
      throw OutputError(path: path, error)
    }
    state = .published
  }

  /// Removes the file under whichever name it has.
  private func withdraw() {
    if case .published = state {
      unlink(path)
      state = .discarded
    }
    discard()
  }

  /// Removes the partial file; nothing appears under the final name.
  public func discard() {
    switch state {
    case .open(let fd):
      close(fd)
      unlink(partialPath)
    case .synced:
      unlink(partialPath)
    case .published, .discarded:
      return
    }
    state = .discarded
  }
}
