import FanoutIndex
import FanoutSnapshot
import FanoutTestSupport
import Foundation
import Testing

@Suite("a compiled index is read in place")
struct MappedIndexTests {
  /// The address ranges of `path`'s mappings in this process.
  func mappings(of path: String) throws -> [ClosedRange<UInt>] {
    // (Read to the end: a /proc file has no size to read up to.)
    let handle = try #require(FileHandle(forReadingAtPath: "/proc/self/maps"))
    let maps = String(decoding: handle.readDataToEndOfFile(), as: UTF8.self)
    // The kernel's spelling of the path: no doubled slashes.
    let canonical = path.replacingOccurrences(of: "//", with: "/")
    return maps.split(separator: "\n").filter { $0.hasSuffix(" " + canonical) }.compactMap { line in
      let bounds = line.prefix { $0 != " " }.split(separator: "-").compactMap {
        UInt($0, radix: 16)
      }
      return bounds.count == 2 ? bounds[0]...(bounds[1] - 1) : nil
    }
  }

  @Test("its columns are the file's mapped pages, and outlive the file's name")
  func mapped() throws {
    let snapshot = SQLiteFixture.make(RandomWorld(seed: 7).sql)
    let compiled = makeTemporaryDirectory("fanout-mapped") + "/index.fanout-index"
    _ = try SnapshotLoader.compile(path: snapshot, output: compiled, cache: nil)
    let fromSQLite = try SnapshotLoader.load(path: snapshot).index
    let index = try SnapshotLoader.load(path: compiled).index

    let ranges = try mappings(of: compiled)
    #expect(!ranges.isEmpty)
    func inFile(_ pointer: UnsafeRawPointer?) -> Bool {
      guard let pointer else { return false }
      let address = UInt(bitPattern: pointer)
      return ranges.contains { $0.contains(address) }
    }
    #expect(inFile(index.memberUser.buffer.baseAddress))
    #expect(inFile(index.channels.pool.bytes.buffer.baseAddress))
    #expect(inFile(index.deviceJSON.bytes.buffer.baseAddress))
    #expect(!inFile(fromSQLite.memberUser.buffer.baseAddress))

    // A cache trim may remove the file while a process reads it: the
    // mapping keeps the pages.
    try FileManager.default.removeItem(atPath: compiled)
    #expect(index.memberUser.elementsEqual(fromSQLite.memberUser))
    #expect(index.channels.pool.sameStrings(as: fromSQLite.channels.pool))
    #expect(index.deviceJSON.sameStrings(as: fromSQLite.deviceJSON))
    #expect(index.userState.elementsEqual(fromSQLite.userState))
  }
}
