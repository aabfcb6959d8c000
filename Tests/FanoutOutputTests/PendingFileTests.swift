import FanoutOutput
import FanoutTestSupport
import Foundation
import Testing

@Suite("files written past the page cache")
struct PendingFileTests {
  /// Sizes around the 4 KiB alignment and the 4 MiB staging buffer.
  static let sizes = [0, 1, 4095, 4096, 4097, 4 << 20, (4 << 20) + 1, 9_437_185]

  @Test("hold exactly the bytes written, however the writes cut them", arguments: sizes)
  func exactBytes(size: Int) throws {
    let dir = makeTemporaryDirectory("fanout-direct")
    var state: UInt64 = UInt64(size) &+ 1
    let bytes = (0..<size).map { _ in
      state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
      return UInt8(truncatingIfNeeded: state >> 56)
    }
    let file = try PendingFile(directory: dir, name: "out.bin", pastPageCache: true)
    // Pieces of uneven sizes, some larger than the staging buffer.
    var offset = 0
    var piece = 1
    while offset < size {
      let end = min(size, offset + piece)
      try file.write(Array(bytes[offset..<end]))
      offset = end
      piece = piece * 7 % 5_000_011 + 3
    }
    #expect(!FileManager.default.fileExists(atPath: dir + "/out.bin"))
    try file.commit()
    let read = try #require(FileManager.default.contents(atPath: dir + "/out.bin"))
    #expect(read.count == size)
    #expect(Array(read) == bytes)
  }

  @Test("a file discarded after writes leaves nothing")
  func discard() throws {
    let dir = makeTemporaryDirectory("fanout-direct")
    let file = try PendingFile(directory: dir, name: "out.bin", pastPageCache: true)
    try file.write([UInt8](repeating: 7, count: 5 << 20))
    file.discard()
    #expect(listDirectory(dir).isEmpty)
  }
}
