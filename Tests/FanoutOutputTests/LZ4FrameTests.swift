import FanoutModel
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
    var blocks: [ArraySlice<UInt8>] = []
    while let (block, ends) = try reader.nextBlock(maxLines: maxLines, maxBytes: maxBytes) {
      #expect(ends.count <= maxLines)
      // Full by bytes only at its last line.
      #expect(ends.dropLast().allSatisfy { $0 + 1 < maxBytes })
      let bytes = Array(block)
      #expect(ends.last == bytes.count - 1)
      for (k, end) in ends.enumerated() {
        #expect(bytes[end] == 0x0A)
        read.append(Array(bytes[(k == 0 ? 0 : ends[k - 1] + 1)..<end]))
      }
      blocks.append(block)
    }
    // Blocks handed out stay as they were while later ones are read.
    #expect(blocks.flatMap { $0 } == text + [0x0A])
    #expect(read == lines)
  }

  @Test("blocks read over several decompressed buffers keep their bytes while later ones are read")
  func blocksOutliveRefills() throws {
    // 5 MB of lines: several of the reader's buffers.
    let text = (0..<100_000).flatMap {
      Array("{\"line\":\($0),\"pad\":\"\(String(repeating: "p", count: $0 % 80))\"}\n".utf8)
    }
    let dir = makeTemporaryDirectory()
    let file = try LZ4FrameFile(directory: dir, name: "big.ndjson.lz4")
    try file.append(blocks: LZ4Frame.blocks(text))
    try file.commit()
    let reader = try LZ4LineReader(path: dir + "/big.ndjson.lz4")
    var blocks: [ArraySlice<UInt8>] = []
    var lines = 0
    while let (block, ends) = try reader.nextBlock(maxLines: 3_000, maxBytes: 1 << 20) {
      blocks.append(block)
      lines += ends.count
    }
    #expect(lines == 100_000)
    #expect(blocks.count > 5)
    #expect(blocks.flatMap { $0 } == text)
  }

  @Test("a line past the reader's limit fails the read, naming the file, by blocks or by lines")
  func lineLimit() throws {
    // 3 MB without a line end after a short line: a few KB compressed.
    let text = Array("short\n".utf8) + [UInt8](repeating: UInt8(ascii: "z"), count: 3 << 20)
    let dir = makeTemporaryDirectory()
    let file = try LZ4FrameFile(directory: dir, name: "bomb.ndjson.lz4")
    try file.append(blocks: LZ4Frame.blocks(text))
    try file.commit()
    let path = dir + "/bomb.ndjson.lz4"
    let byBlocks = try LZ4LineReader(path: path, maxLineBytes: 1 << 20)
    let first = try byBlocks.nextBlock(maxLines: 10)
    #expect(first?.ends == [5])
    #expect(throws: OutputError.self) { _ = try byBlocks.nextBlock(maxLines: 10) }
    let byLines = try LZ4LineReader(path: path, maxLineBytes: 1 << 20)
    #expect(try byLines.nextLine().map(Array.init) == Array("short".utf8))
    do {
      _ = try byLines.nextLine()
      Issue.record("a line of 3 MB was read past a limit of 1 MB")
    } catch {
      #expect("\(error)".contains("a line longer than 1048576 bytes (no line end)"))
      #expect("\(error)".contains(path))
    }
    // Under the default limit, the same file reads whole.
    let whole = try LZ4LineReader(path: path)
    _ = try whole.nextLine()
    #expect(try whole.nextLine()?.count == 3 << 20)
  }

  @Test(
    "a file read against its recorded size and digest: read whole if equal, else refused at its end; never a link or FIFO"
  )
  func expectedBytes() throws {
    let dir = makeTemporaryDirectory()
    let file = try LZ4FrameFile(directory: dir, name: "a.ndjson.lz4")
    try file.append(blocks: LZ4Frame.blocks(Array("one\ntwo\n".utf8)))
    try file.commit()
    let path = dir + "/a.ndjson.lz4"
    let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
    let digest = bytes.withUnsafeBytes { XXH64.hash($0, seed: 0) }
    func lines(_ expecting: (bytes: Int, digest: UInt64)) throws(OutputError) -> Int {
      let reader = try LZ4LineReader(path: path, expecting: expecting)
      var count = 0
      while try reader.nextLine() != nil { count += 1 }
      return count
    }
    #expect(try lines((bytes.count, digest)) == 2)
    // As if the file had changed after it was checked.
    #expect(throws: OutputError.self) { _ = try lines((bytes.count, digest ^ 1)) }
    #expect(throws: OutputError.self) { _ = try lines((bytes.count + 1, digest)) }
    #expect(symlink(path, dir + "/link") == 0)
    #expect(mkfifo(dir + "/fifo", 0o644) == 0)
    for other in ["link", "fifo"] {
      #expect(throws: OutputError.self) {
        _ = try LZ4LineReader(path: dir + "/" + other, expecting: (bytes.count, digest))
      }
    }
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
