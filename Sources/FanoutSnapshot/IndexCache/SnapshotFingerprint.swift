import FanoutIndex
import FanoutModel
import FanoutSQLite
import FanoutTime

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// What names one state of a snapshot file, for the compiled index cache:
/// its device, inode, size, modification and change times (ns), and from
/// SQLite's header the file change counter and schema cookie — plus this
/// build of Fanout and the index format, which decide what is compiled.
///
/// Nil (not cacheable) while the file may hold more than its main file says
/// or may still be changing within the file system's time resolution:
/// - a non-empty `-wal` file (commits there change neither the main file's
///   times nor its header until a checkpoint) or `-journal` (a writer
///   mid-commit, or a crash to roll back; journal_mode=TRUNCATE leaves an
///   empty one between transactions);
/// - modified less than `settleSeconds` ago: a later change then always
///   shows in the times, even on file systems that keep them to the second
///   (two commits in one tick could otherwise leave every field equal).
package struct SnapshotFingerprint: Equatable, Sendable {
  package let words: [Int64]

  package static let settleSeconds: Int64 = 2

  /// The state of the snapshot at `path`, whose SQLite header is `header`
  /// (read inside the load's read transaction, through `Connection.fileHeader`).
  package init?(path: String, header bytes: [UInt8]?) {
    var st = stat()
    guard stat(path, &st) == 0, st.st_mode & S_IFMT == S_IFREG else { return nil }
    for suffix in ["-wal", "-journal"] {
      var side = stat()
      if stat(path + suffix, &side) == 0, side.st_size > 0 { return nil }
    }
    func nanos(_ t: timespec) -> Int64 { Int64(t.tv_sec) &* 1_000_000_000 &+ Int64(t.tv_nsec) }
    let newest = max(nanos(st.st_mtim), nanos(st.st_ctim))
    guard WallClock.nowMillis() &* 1_000_000 &- newest >= Self.settleSeconds &* 1_000_000_000
    else { return nil }
    guard let bytes, let header = Self.header(bytes), let build = Self.build else { return nil }
    words =
      [
        Int64(IndexFile.formatVersion), Int64(bitPattern: UInt64(st.st_dev)),
        Int64(bitPattern: UInt64(st.st_ino)), Int64(st.st_size), nanos(st.st_mtim),
        nanos(st.st_ctim), header.changeCounter, header.schemaCookie,
      ] + build
  }

  /// The key of a compiled snapshot written to a file of its own (`snapshot
  /// compile --out`): only the format and the build, no snapshot state.
  package static var buildKey: [Int64] { [Int64(IndexFile.formatVersion)] + (build ?? []) }

  /// Whether `key` was written by this build in this format.
  package static func isThisBuild(_ key: [Int64]) -> Bool {
    guard let build, key.count >= 1 + build.count else { return false }
    return key.first == Int64(IndexFile.formatVersion) && Array(key.suffix(build.count)) == build
  }

  /// Bytes 24–27 and 40–43 of the database header (big-endian).
  private static func header(_ bytes: [UInt8]) -> (changeCounter: Int64, schemaCookie: Int64)? {
    guard bytes.count == 100, bytes.starts(with: Array("SQLite format 3\0".utf8)) else {
      return nil
    }
    func word(_ at: Int) -> Int64 { bytes[at..<at + 4].reduce(0) { $0 << 8 | Int64($1) } }
    return (word(24), word(40))
  }

  /// The running executable's device, inode, size and modification time:
  /// a rebuilt Fanout never reads what an earlier build compiled.
  private static let build: [Int64]? = {
    var st = stat()
    guard stat("/proc/self/exe", &st) == 0 else { return nil }
    return [
      Int64(bitPattern: UInt64(st.st_dev)), Int64(bitPattern: UInt64(st.st_ino)),
      Int64(st.st_size), Int64(st.st_mtim.tv_sec) &* 1_000_000_000 &+ Int64(st.st_mtim.tv_nsec),
    ]
  }()

  /// The file name the compiled index of this state is cached under.
  package var fileName: String {
    var h: UInt64 = 0xcbf2_9ce4_8422_2325
    var g: UInt64 = 0x8422_2325_cbf2_9ce4
    for w in words {
      h = (h ^ UInt64(bitPattern: w)) &* 0x100_0000_01b3
      g = (g ^ UInt64(bitPattern: w)) &* 0xff51_afd7_ed55_8ccd
      g ^= g >> 29
    }
    func hex(_ v: UInt64) -> String {
      let digits = String(v, radix: 16)
      return String(repeating: "0", count: 16 - digits.count) + digits
    }
    return hex(h) + hex(g) + ".fanout-index"
  }
}
