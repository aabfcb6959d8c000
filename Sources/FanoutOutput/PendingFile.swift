/// FanoutOutput owns the bytes that leave the process: files that appear
/// under their final name only when complete (written aside, synced, then
/// renamed), LZ4 frames, and summary.json.
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

  @inline(never)
  static func errno(_ path: String, _ call: String) -> OutputError {
    OutputError(path: path, reason: "\(call): \(String(cString: strerror(Glibc.errno)))")
  }

  public var description: String { "cannot write '\(path)': \(reason)" }
}

/// A file written aside as `.NAME.partial` in its folder and renamed to NAME
/// by `commit()`. Until then (or after `discard()`, or a crash) no file of
/// that name appears.
public final class PendingFile {
  public let path: String
  let partialPath: String
  private var fd: Int32

  public init(directory: String, name: String) throws(OutputError) {
    path = directory + "/" + name
    partialPath = directory + "/." + name + ".partial"
    unlink(partialPath)  // left over from a crashed run
    fd = open(partialPath, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o644)
    guard fd >= 0 else { throw OutputError.errno(partialPath, "open") }
  }

  deinit { discard() }

  public func write(_ bytes: [UInt8]) throws(OutputError) {
    var failure: OutputError?
    bytes.withUnsafeBytes { raw in
      do throws(OutputError) { try write(raw) } catch { failure = error }
    }
    if let failure { throw failure }
  }

  public func write(_ raw: UnsafeRawBufferPointer) throws(OutputError) {
    var done = 0
    while done < raw.count {
      let n = Glibc.write(fd, raw.baseAddress! + done, raw.count - done)
      if n < 0 {
        if errno == EINTR { continue }
        throw OutputError.errno(partialPath, "write")
      }
      done += n
    }
  }

  /// Syncs, closes and renames the file to its final name.
  public func commit() throws(OutputError) {
    guard fd >= 0 else { return }
    guard fsync(fd) == 0 else { throw OutputError.errno(partialPath, "fsync") }
    guard close(fd) == 0 else { throw OutputError.errno(partialPath, "close") }
    fd = -1
    guard rename(partialPath, path) == 0 else { throw OutputError.errno(path, "rename") }
  }

  /// Removes the partial file; nothing appears under the final name.
  public func discard() {
    guard fd >= 0 else { return }
    close(fd)
    fd = -1
    unlink(partialPath)
  }
}
