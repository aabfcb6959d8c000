import FanoutOutput
import FanoutTestSupport
import Foundation
import Testing

@Suite("LZ4 frames and pending files")
struct LZ4FrameTests {
  /// Seeded bytes: half repetitive text, half noise (incompressible blocks).
  static func sample(_ count: Int, seed: UInt64) -> [UInt8] {
    var state = seed
    return (0..<count).map { i in
      if (i / 100_000) % 2 == 0 { return UInt8(ascii: "a") + UInt8(i % 7) }
      state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
      return UInt8(truncatingIfNeeded: state >> 56)
    }
  }

  @Test(
    "a file of blocks written in pieces reads back whole, with liblz4 and the lz4 tool",
    arguments: [0, 1, 5_000, 9_000_000])
  func roundTrip(_ size: Int) throws {
    let data = Self.sample(size, seed: UInt64(size) + 1)
    let dir = makeTemporaryDirectory()
    let file = try LZ4FrameFile(directory: dir, name: "x.ndjson.lz4")
    // Pieces compressed separately, as workers do, in one frame.
    let cut = data.count / 3
    try file.append(blocks: LZ4Frame.blocks(Array(data[..<cut])))
    try file.append(blocks: LZ4Frame.blocks(Array(data[cut...])))
    try file.commit()
    let bytes = Array(FileManager.default.contents(atPath: dir + "/x.ndjson.lz4")!)
    #expect(decodeLZ4Frames(bytes) == data)
    let viaTool = runProcess("/usr/bin/lz4", ["-dc", dir + "/x.ndjson.lz4"])
    #expect(viaTool.status == 0)
    #expect(viaTool.stdout == data)
  }

  @Test(
    "lines read a block at a time: each block ends at its line count or after the line that fills it; every line back, in order",
    arguments: [(7, Int.max), (1_000, 300), (3, 1)])
  func lineBlocks(maxLines: Int, maxBytes: Int) throws {
    var random = UInt64(maxLines + maxBytes % 1_000)
    let lines = (0..<500).map { k -> [UInt8] in
      random = random &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
      return Array("line \(k) ".utf8)
        + [UInt8](repeating: UInt8(ascii: "x"), count: Int(random >> 58))
    }
    let text = lines.flatMap { $0 + [UInt8(0x0A)] }.dropLast()  // the last line without its newline
    let dir = makeTemporaryDirectory()
    let file = try LZ4FrameFile(directory: dir, name: "x.ndjson.lz4")
    try file.append(blocks: LZ4Frame.blocks(Array(text)))
    try file.commit()
    let reader = try LZ4LineReader(path: dir + "/x.ndjson.lz4")
    var read: [[UInt8]] = []
    while true {
      var bytes: [UInt8] = []
      var ends: [Int] = []
      guard try reader.nextLines(maxLines: maxLines, maxBytes: maxBytes, into: &bytes, ends: &ends)
      else { break }
      #expect(ends.count <= maxLines)
      // Full by bytes only at its last line.
      #expect(ends.dropLast().allSatisfy { $0 + 1 < maxBytes })
      for (k, end) in ends.enumerated() {
        #expect(bytes[end] == 0x0A)
        read.append(Array(bytes[(k == 0 ? 0 : ends[k - 1] + 1)..<end]))
      }
    }
    #expect(read == lines)
  }

  @Test("a pending file has no final name until committed, and none after discard")
  func pending() throws {
    let dir = makeTemporaryDirectory()
    let kept = try PendingFile(directory: dir, name: "kept.json")
    try kept.write(Array("{}".utf8))
    #expect(listDirectory(dir) == [".kept.json.partial"])
    try kept.commit()
    #expect(listDirectory(dir) == ["kept.json"])
    #expect(readText(dir + "/kept.json") == "{}")
    let dropped = try PendingFile(directory: dir, name: "dropped.json")
    try dropped.write(Array("half".utf8))
    dropped.discard()
    #expect(listDirectory(dir) == ["kept.json"])
  }
}
