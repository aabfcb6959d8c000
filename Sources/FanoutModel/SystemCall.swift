#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// A failed system call: which one, and the errno it left.
public struct SystemCallError: Error, CustomStringConvertible, Equatable {
  public let call: String
  public let code: Int32

  public init(call: String, code: Int32) {
    self.call = call
    self.code = code
  }

  /// The system's words for the errno.
  public var reason: String { String(cString: strerror(code)) }
  public var description: String { "\(call): \(reason)" }
}

/// Runs `body`, a system call that returns -1 on failure, again while it
/// fails with EINTR; on any other failure throws its errno, read right
/// after the call, before anything else can change it.
///
/// Not for `close`, which must not be retried.
@inline(__always)
public func systemCall<T: BinaryInteger>(_ name: String, _ body: () -> T)
  throws(SystemCallError) -> T
{
  while true {
    let result = body()
    if result != -1 { return result }
    let code = errno
    if code != EINTR { throw SystemCallError(call: name, code: code) }
  }
}

/// Writes all of `bytes` to `fd`: again after a short write or EINTR; a
/// write that takes nothing fails (as ENOSPC) rather than being tried for
/// ever.
public func writeAll(_ fd: Int32, _ bytes: UnsafeRawBufferPointer) throws(SystemCallError) {
  var done = 0
  while done < bytes.count {
    let n = write(fd, bytes.baseAddress! + done, bytes.count - done)
    if n > 0 {
      done += n
    } else if n < 0 && errno == EINTR {
      continue
    } else {
      throw SystemCallError(call: "write", code: n == 0 ? ENOSPC : errno)
    }
  }
}

/// Why a lock file could not be opened (`openLockFile`).
public enum LockFileError: Error, CustomStringConvertible {
  /// A symbolic link, or not a regular file, where the lock file belongs.
  case notPlain
  case system(SystemCallError)

  public var description: String {
    switch self {
    case .notPlain:
      "it is a symbolic link or not a plain file; remove it (Fanout never follows one)"
    case .system(let error): error.description
    }
  }
}

/// Opens the lock file at `path` for reading and writing, creating it
/// (0600) if needed: never through a symbolic link, and only a regular
/// file (a FIFO or device put there is refused, not used).
public func openLockFile(_ path: String) throws(LockFileError) -> Int32 {
  let fd: Int32
  do {
    fd = try systemCall("open") {
      open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0o600)
    }
  } catch  where error.code == ELOOP {
    throw .notPlain
  } catch {
    throw .system(error)
  }
  var opened = stat()
  guard fstat(fd, &opened) == 0, opened.st_mode & S_IFMT == S_IFREG else {
    close(fd)
    throw .notPlain
  }
  return fd
}

/// The names in the folder `listing` (from `opendir` or `fdopendir`) but
/// "." and "..", in the system's order; closes `listing`. With `prefix`,
/// only the names that start with it: the others are passed over before
/// a string is made of them (a shared `/tmp` holds thousands).
public func folderEntryNames(_ listing: OpaquePointer, prefix: String = "") -> [String] {
  defer { closedir(listing) }
  let prefix = Array(prefix.utf8)
  var names: [String] = []
  while let entry = readdir(listing) {
    let name = withUnsafeBytes(of: entry.pointee.d_name) { bytes -> String? in
      // (A shorter name's terminating NUL differs from the prefix's byte.)
      bytes.starts(with: prefix)
        ? String(cString: bytes.bindMemory(to: CChar.self).baseAddress!) : nil
    }
    if let name, name != "." && name != ".." { names.append(name) }
  }
  return names
}

/// All that `fd` holds, read to its end (each `read` retried on EINTR);
/// nil once it holds more than `limit` bytes (an endless input such as
/// /dev/zero is not read until memory runs out).
public func readToEnd(_ fd: Int32, limit: Int) throws(SystemCallError) -> [UInt8]? {
  var bytes: [UInt8] = []
  var buffer = [UInt8](repeating: 0, count: 1 << 16)
  while true {
    let n = try systemCall("read") {
      buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress!, $0.count) }
    }
    if n == 0 { return bytes }
    bytes += buffer[0..<n]
    if bytes.count > limit { return nil }
  }
}

/// Why `readPlainFile` read nothing.
public enum PlainFileError: Error {
  case missing
  /// A symbolic link, FIFO, device or folder where a file was expected.
  case notPlain
  case tooLarge(limit: Int)
  case system(SystemCallError)
}

/// Opens the regular file at `path` for reading, in a folder someone else
/// may have written: never through a symbolic link, never blocked by a FIFO
/// put in its place. The caller closes the descriptor.
public func openPlainFile(_ path: String) throws(PlainFileError) -> Int32 {
  let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)
  guard fd >= 0 else {
    let code = errno
    if code == ENOENT { throw .missing }
    if code == ELOOP { throw .notPlain }
    throw .system(SystemCallError(call: "open", code: code))
  }
  var info = stat()
  guard fstat(fd, &info) == 0, info.st_mode & S_IFMT == S_IFREG else {
    close(fd)
    throw .notPlain
  }
  return fd
}

/// The bytes of the regular file at `path` (`openPlainFile`), at most
/// `limit` of them.
public func readPlainFile(_ path: String, limit: Int) throws(PlainFileError) -> [UInt8] {
  let fd = try openPlainFile(path)
  defer { close(fd) }
  let bytes: [UInt8]?
  do { bytes = try readToEnd(fd, limit: limit) } catch { throw .system(error) }
  guard let bytes else { throw .tooLarge(limit: limit) }
  return bytes
}
