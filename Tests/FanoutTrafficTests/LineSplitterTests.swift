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
}
