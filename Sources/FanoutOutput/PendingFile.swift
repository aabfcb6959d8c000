/// FanoutOutput owns the bytes that leave the process: files that appear
/// under their final name only when complete (written aside, synced, then
/// renamed), LZ4 frames, and summary.json.
import FanoutModel

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// Linux's `O_DIRECT`, which Glibc's Swift overlay does not export (it is
/// behind `_GNU_SOURCE`): the values of `<asm/fcntl.h>` per architecture;
/// 0 elsewhere (files are then written through the page cache).
#if os(Linux) && arch(x86_64)
  let directFlag: Int32 = 0o40000
#elseif os(Linux) && arch(arm64)
  let directFlag: Int32 = 0o200000
#else
  let directFlag: Int32 = 0
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
  /// When the file is written past the page cache: its bytes until they fill
  /// an aligned write.
  private var direct: DirectWrites?
  /// Removes the partial file if a signal ends the run (`CleanupOnSignal`).
  private var cleanup: Int?
  /// With `digested`: the bytes written so far, and their XXH64.
  public private(set) var bytesWritten = 0
  private var digest: XXH64.Stream?

  /// The file's size and XXH64 digest (seed 0), when it was opened `digested`.
  public var contents: (bytes: Int, digest: UInt64)? {
    digest.map { (bytesWritten, $0.finish()) }
  }

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

  /// - Parameter digested: keep the XXH64 of the bytes written (`contents`),
  ///   for outputs another process checks before it trusts them (`fanout merge`).
  /// - Parameter pastPageCache: write with `O_DIRECT`, in aligned writes of
  ///   `DirectWrites.capacity` bytes, for large outputs: the kernel then
  ///   copies nothing into the page cache (measured: 18% of an `eval`'s CPU
  ///   time went to that copy). Where the file system refuses, written as
  ///   usual.
  public init(
    directory: String, name: String, pastPageCache: Bool = false, digested: Bool = false
  ) throws(OutputError) {
    path = directory + "/" + name
    digest = digested ? XXH64.Stream() : nil
    partialPath = directory + "/." + name + ".partial"
    unlink(partialPath)  // left over from a crashed run
    let partialPath = partialPath
    let (opened, key) = try CleanupOnSignal.make(
      { () throws(OutputError) -> (fd: Int32, direct: Bool) in
        let flags = O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC
        if pastPageCache && directFlag != 0 {
          let fd = open(partialPath, flags | directFlag, 0o644)
          if fd >= 0 { return (fd, true) }
          unlink(partialPath)
        }
        do throws(SystemCallError) {
          return (try systemCall("open") { open(partialPath, flags, 0o644) }, false)
        } catch {
          throw OutputError(path: partialPath, error)
        }
      }, undoneBy: { _ in unlink(partialPath) })
    cleanup = key
    state = .open(opened.fd)
    if opened.direct { direct = DirectWrites() }
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
    if digest != nil {
      digest!.update(raw)
      bytesWritten += raw.count
    }
    if let direct {
      var done = 0
      while done < raw.count {
        done += direct.stage(UnsafeRawBufferPointer(rebasing: raw[done...]))
        if direct.isFull { try writeStaged(fd, direct) }
      }
      return
    }
    do { try writeAll(fd, raw) } catch { throw OutputError(path: partialPath, error) }
  }

  /// Flushes the file to disk and closes it, still under its partial name.
  public func sync() throws(OutputError) {
    guard case .open(let fd) = state else { return }
    if let direct {
      try writeStaged(fd, direct)
      // The last write was padded to the alignment: cut the file back.
      let size = off_t(direct.fileSize)
      do { _ = try systemCall("ftruncate") { ftruncate(fd, size) } } catch {
        throw OutputError(path: partialPath, error)
      }
      self.direct = nil
    }
    do { _ = try systemCall("fsync") { fsync(fd) } } catch {
      throw OutputError(path: partialPath, error)
    }
    state = .synced
    guard close(fd) == 0 else {
      throw OutputError(path: partialPath, SystemCallError(call: "close", code: errno))
    }
  }

  /// Writes what `direct` holds, padded to the alignment. If the file
  /// system refuses an `O_DIRECT` write, the rest goes through the page
  /// cache, here and for the rest of the file.
  private func writeStaged(_ fd: Int32, _ direct: DirectWrites) throws(OutputError) {
    let bytes = direct.count
    var end = direct.paddedCount()
    var done = 0
    while done < end {
      let n = Glibc.write(fd, direct.buffer + done, end - done)
      if n > 0 {
        done += n
      } else if n < 0 && errno == EINTR {
        continue
      } else if n < 0 && errno == EINVAL && fcntl(fd, F_GETFL) & directFlag != 0 {
        _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~directFlag)
        end = max(done, bytes)
      } else {
        let code = n == 0 ? ENOSPC : errno
        throw OutputError(path: partialPath, SystemCallError(call: "write", code: code))
      }
    }
    direct.written(bytes)
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
      // A signal waits for the renames: the run is then complete.
      try CleanupOnSignal.commit { () throws(OutputError) in
        for file in files { try file.publish() }
      }
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
    withdrawCleanup()
  }

  private func withdrawCleanup() {
    if let cleanup { CleanupOnSignal.withdraw(cleanup) }
    cleanup = nil
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
    direct = nil
    defer { withdrawCleanup() }
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

/// The bytes of a file written with `O_DIRECT`, gathered in an aligned
/// buffer until they fill it (such writes must start, end and come from
/// addresses at multiples of the file system's block size).
private final class DirectWrites {
  static let alignment = 4096
  static let capacity = 4 << 20
  let buffer = UnsafeMutableRawPointer.allocate(byteCount: capacity, alignment: alignment)
  /// Bytes held, not yet written.
  private(set) var count = 0
  /// Bytes written before them: the file's size without the padding.
  private(set) var fileSize = 0

  deinit { buffer.deallocate() }

  var isFull: Bool { count == Self.capacity }

  /// Takes as much of `bytes` as fits; returns how much.
  func stage(_ bytes: UnsafeRawBufferPointer) -> Int {
    let n = min(bytes.count, Self.capacity - count)
    if n > 0 { (buffer + count).copyMemory(from: bytes.baseAddress!, byteCount: n) }
    count += n
    return n
  }

  /// `count` rounded up to the alignment, the padding zeroed.
  func paddedCount() -> Int {
    let padded = (count + Self.alignment - 1) / Self.alignment * Self.alignment
    (buffer + count).initializeMemory(as: UInt8.self, repeating: 0, count: padded - count)
    return padded
  }

  /// The held bytes are in the file.
  func written(_ bytes: Int) {
    fileSize += bytes
    count = 0
  }
}
