#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// Which file a path names: its device and inode. Two paths name one file
/// when their identities are equal — however they are spelt, through links
/// or not — which is how a command tells that what it would write over or
/// remove is what it reads.
public struct FileIdentity: Equatable, Sendable {
  public let device: UInt64
  public let inode: UInt64

  /// The file at `path` (through a link, unless `followingLinks` is
  /// false: then the link itself); nil when there is none.
  public init?(path: String, followingLinks: Bool = true) {
    var info = stat()
    guard (followingLinks ? stat(path, &info) : lstat(path, &info)) == 0 else { return nil }
    self.init(info)
  }

  /// The file open as `descriptor`, when it is a regular file (standard
  /// input redirected from one); nil otherwise.
  public init?(regularFileOpenAs descriptor: Int32) {
    var info = stat()
    guard fstat(descriptor, &info) == 0, info.st_mode & S_IFMT == S_IFREG else { return nil }
    self.init(info)
  }

  private init(_ info: stat) {
    device = UInt64(info.st_dev)
    inode = UInt64(info.st_ino)
  }
}

/// "-" names standard output, which only `stream --out -` writes to: as the
/// path of a `kind` ("file", "folder") that `option` writes, it is refused
/// rather than made. The refusal, if `path` is "-".
public func standardOutputRefusal(_ option: String, _ path: String?, kind: String) -> String? {
  path == "-" ? "\(option) takes a \(kind)'s path; '-' (standard output) is not one" : nil
}
