import FanoutModel
import FanoutTestSupport
import FanoutTraffic
import Testing

/// The lines of `blocks`, as text with their numbers.
private func numbered(_ blocks: [LineBlock]) -> [String] {
  blocks.flatMap { block in
    (0..<block.count).map { k in
      "\(block.firstLine + k):"
        + String(decoding: block.bytes[block.starts[k]..<block.ends[k]], as: UTF8.self)
    }
  }
}

@Suite("Cutting input into lines")
struct LineSplitterTests {
  let input = Array("a\r\n\nbb\r\nccc\n\r\nlast\r".utf8)
  let expected = ["1:a", "2:", "3:bb", "4:ccc", "5:", "6:last"]

  @Test(
    "the same lines, numbered, wherever the reads split the bytes", arguments: [1, 2, 3, 5, 64])
  func anySplit(readSize: Int) {
    var splitter = LineSplitter()
    var blocks: [LineBlock] = []
    for start in stride(from: 0, to: input.count, by: readSize) {
      input[start..<min(start + readSize, input.count)].withUnsafeBytes { splitter.append($0) }
      while let block = splitter.take(maxLines: 2) { blocks.append(block) }
    }
    #expect(splitter.completeLines == 0 && splitter.bufferedBytes == "last\r".utf8.count)
    while let block = splitter.take(maxLines: 2, final: true) { blocks.append(block) }
    #expect(numbered(blocks) == expected)
    #expect(blocks.allSatisfy { $0.count <= 2 })
    #expect(splitter.bufferedBytes == 0)
  }

  @Test("a block's lines can be cut without copying, keeping their numbers")
  func cutBlock() {
    var splitter = LineSplitter()
    input.withUnsafeBytes { splitter.append($0) }
    let block = splitter.take(maxLines: .max, final: true)!
    #expect(numbered([block.lines(0..<2), block.lines(2..<6)]) == expected)
  }

  /// Lines over the limit, however the reads cut them, come out as empty
  /// lines listed as oversized, in place and numbered like the others.
  @Test("lines over --max-line-bytes are marked, wherever the reads split them")
  func oversized() {
    var random = SeededRandom(seed: 11)
    let limit = 20
    for _ in 0..<300 {
      // Lines of 0 to 60 bytes, some with CR LF, the last maybe without a line end.
      var input: [UInt8] = []
      var expected: [String] = []
      let lineCount = Int(random.next() % 12) + 1
      for k in 0..<lineCount {
        let last = k == lineCount - 1 && random.next() % 2 == 0
        // (A last line without a line end has at least one byte, or it is no line.)
        let length = Int(random.next() % 61) + (last ? 1 : 0)
        let text = String(repeating: "x", count: length)
        let crlf = random.next() % 3 == 0
        input += Array(text.utf8) + (last ? [] : crlf ? [0x0D, 0x0A] : [0x0A])
        expected.append("\(k + 1):" + (length > limit ? "<oversized>" : text))
      }
      var splitter = LineSplitter(maxLineBytes: limit)
      var blocks: [LineBlock] = []
      var start = 0
      while start < input.count {
        let size = Int(random.next() % 25) + 1
        input[start..<min(start + size, input.count)].withUnsafeBytes { splitter.append($0) }
        start += size
        #expect(splitter.bufferedBytes <= limit + 1 + 25 + 2 * 61)
        while let block = splitter.take(maxLines: Int(random.next() % 3) + 1) {
          blocks.append(block)
        }
      }
      while let block = splitter.take(maxLines: 2, final: true) { blocks.append(block) }
      let got = blocks.flatMap { block in
        (0..<block.count).map { k in
          "\(block.firstLine + k):"
            + (block.oversized.contains(k)
              ? "<oversized>"
              : String(decoding: block.bytes[block.starts[k]..<block.ends[k]], as: UTF8.self))
        }
      }
      #expect(got == expected, "\(String(decoding: input, as: UTF8.self))")
    }
  }

  @Test("a traffic file's line over the reader's limit is rejected by number, the rest read")
  func readerLimit() throws {
    let path = makeTemporaryDirectory("fanout-lines") + "/traffic.ndjson"
    let long = String(repeating: "y", count: 5_000)
    try "first\n\(long)\nthird\n\(long)".write(toFile: path, atomically: true, encoding: .utf8)
    let reader = try LineReader(path: path, maxLineBytes: 1_000)
    var blocks: [LineBlock] = []
    while let block = try reader.next(maxLines: 2) { blocks.append(block) }
    #expect(numbered(blocks) == ["1:first", "2:", "3:third", "4:"])
    #expect(blocks.map(\.oversized) == [[1], [1]])
    // No option sets a file's limit: the reason names none.
    #expect(
      blocks[0].oversizedReason == "line longer than 1000 bytes; skipped to the next line end")
    #expect(maxFileLineBytes == 256 << 20)
  }
}
