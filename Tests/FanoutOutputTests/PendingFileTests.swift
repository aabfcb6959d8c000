import FanoutModel
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

@Suite("a file's digest while it is written")
struct DigestTests {
  @Test("XXH64 over pieces equals XXH64 of the whole, for any cut; a digested file reports it")
  func pieces() throws {
    var random = SeededRandom(seed: 5)
    for length in [0, 1, 3, 31, 32, 33, 64, 100, 1000, 4099] {
      let bytes = (0..<length).map { _ in UInt8(truncatingIfNeeded: random.next()) }
      let whole = bytes.withUnsafeBytes { XXH64.hash($0, seed: 0) }
      var stream = XXH64.Stream()
      var at = 0
      while at < length {
        let piece = min(length - at, Int(random.next() % 40))
        bytes.withUnsafeBytes {
          stream.update(UnsafeRawBufferPointer(rebasing: $0[at..<(at + piece)]))
        }
        at += piece
      }
      #expect(stream.finish() == whole, "\(length) bytes")
    }
    // The known value of the empty input (xxhash.com's test vector, seed 0).
    #expect(XXH64.Stream().finish() == 0xEF46_DB37_51D8_E999)

    let dir = makeTemporaryDirectory()
    let file = try PendingFile(directory: dir, name: "x.ndjson", digested: true)
    let content = Array("hello, digested world\n".utf8)
    try file.write(Array(content[0..<5]))
    try file.write(Array(content[5...]))
    #expect(file.contents?.bytes == content.count)
    #expect(file.contents?.digest == content.withUnsafeBytes { XXH64.hash($0, seed: 0) })
    try file.commit()
  }
}
