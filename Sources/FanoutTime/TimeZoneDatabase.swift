#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// Why a zone name could not be turned into a table.
public struct TimeZoneError: Error, CustomStringConvertible, Equatable {
  public let name: String
  public let reason: String
  public var description: String { "time zone '\(name)': \(reason)" }
}

/// The system's IANA tz database: `$TZDIR`, else `/usr/share/zoneinfo`.
///
/// Names are case-sensitive, as in the database itself; a name is a relative
/// path of letters, digits and `/_+-` and may not climb out of the folder.
public struct TimeZoneDatabase: Sendable {
  public let root: String

  public init(root: String? = nil) {
    if let root {
      self.root = root
    } else if let dir = getenv("TZDIR"), dir.pointee != 0 {
      self.root = String(cString: dir)
    } else {
      self.root = "/usr/share/zoneinfo"
    }
  }

  /// Reads and expands one zone.
  public func zone(named name: String) throws(TimeZoneError) -> ZoneTable {
    guard Self.isPlausibleName(name) else {
      throw TimeZoneError(name: name, reason: "not a time zone name")
    }
    guard let bytes = Self.readFile(root + "/" + name) else {
      throw TimeZoneError(name: name, reason: "unknown to the tz database in \(root)")
    }
    do {
      return try TZifParser.parse(bytes, name: name)
    } catch {
      throw TimeZoneError(name: name, reason: "unreadable tz file: \(error.reason)")
    }
  }

  static func isPlausibleName(_ name: String) -> Bool {
    guard !name.isEmpty, name.utf8.first != UInt8(ascii: "/") else { return false }
    for part in name.split(separator: "/", omittingEmptySubsequences: false) {
      if part.isEmpty || part == "." || part == ".." { return false }
    }
    return name.utf8.allSatisfy { c in
      (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A)
        || c == UInt8(ascii: "/") || c == UInt8(ascii: "_") || c == UInt8(ascii: "+")
        || c == UInt8(ascii: "-")
    }
  }

  static func readFile(_ path: String) -> [UInt8]? {
    let fd = open(path, O_RDONLY)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var st = stat()
    guard fstat(fd, &st) == 0, (st.st_mode & S_IFMT) == S_IFREG else { return nil }
    var result: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 16_384)
    while true {
      let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
      if n < 0 && errno == EINTR { continue }
      if n <= 0 { return n == 0 ? result : nil }
      result.append(contentsOf: chunk[0..<n])
    }
  }
}
