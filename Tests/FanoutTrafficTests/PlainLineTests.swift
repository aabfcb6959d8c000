import FanoutIndex
import FanoutKernel
import FanoutModel
import FanoutSnapshot
import FanoutTestSupport
import Testing

@testable import FanoutTraffic

private let index: Index = try! SnapshotLoader.load(
  path: SQLiteFixture.make(
    SQLiteFixture.header + """
      INSERT INTO users (user_id) VALUES ('u1'), ('u2'), ('u3'), ('a-much-longer-user-name-0001');
      INSERT INTO channels VALUES ('c', 'group'), ('gr:0436305', 'group');
      INSERT INTO categories VALUES ('news', 'opt_in', 0);
      """)
).index

/// Parses `lines` with the fast path for plain lines on or off.
private func parse(_ lines: [[UInt8]], plain: Bool) -> (MessageBatch, plainLines: Int) {
  var parser = TrafficParser(index: index, readsPlainLines: plain)
  for (i, line) in lines.enumerated() {
    line.withUnsafeBytes { parser.parse($0, line: i + 1) }
  }
  let plainLines = parser.plainLinesRead
  return (parser.finish(), plainLines)
}

/// Every column of two batches, and their rejections, compared.
private func expectSame(_ a: MessageBatch, _ b: MessageBatch, _ context: String) {
  #expect(a.lines == b.lines, "\(context)")
  #expect(a.idJSON.sameStrings(as: b.idJSON), "\(context)")
  #expect(a.channel == b.channel, "\(context)")
  #expect(a.sender == b.sender, "\(context)")
  #expect(a.ts == b.ts, "\(context)")
  #expect(a.kind == b.kind, "\(context)")
  #expect(a.mentionAll == b.mentionAll, "\(context)")
  #expect(a.force == b.force, "\(context)")
  #expect(a.silent == b.silent, "\(context)")
  #expect(a.thread.sameStrings(as: b.thread), "\(context)")
  #expect(a.hasThread == b.hasThread, "\(context)")
  #expect(a.replyTo == b.replyTo, "\(context)")
  #expect(a.category == b.category, "\(context)")
  #expect(a.mentionOffsets == b.mentionOffsets, "\(context)")
  #expect(a.mentions == b.mentions, "\(context)")
  #expect(a.rejections == b.rejections, "\(context)")
}

@Suite("Plain traffic lines: the fast path reads them as the general parser does")
struct PlainLineTests {
  /// Lines of the plain shape, every field and value kind among them.
  static let plain: [String] = [
    #"{"id":"g0","channel":"gr:0436305","sender":"u3","ts":1772928000490,"mentions":["u1"]}"#,
    #"{"id":"g1","channel":"c","sender":"u2","ts":1772928000259}"#,
    #"{"id":"g3","channel":"c","sender":"u1","ts":0,"kind":"call","reply_to":"u1"}"#,
    #"{"id":"m-7 with spaces ~!","channel":"c","ts":-42,"kind":"pinned","force":true}"#,
    #"{"id":"x","channel":"c","ts":5,"mentions":["u3","zed","u1","u3","a-much-longer-user-name-0001"]}"#,
    #"{"id":"x","channel":"c","ts":5,"mentions":[],"mention_all":true,"silent":false}"#,
    #"{"id":"x","channel":"c","ts":5,"category":"news","thread":"","silent":true}"#,
    #"{"id":"x","channel":"c","ts":5,"category":"promo"}"#,
    #"{"id":"x","channel":"nope","ts":5,"sender":"ghost"}"#,
    #"{"id":"","channel":"c","ts":999999999999999999,"thread":"t-1"}"#,
    #"{"id":"del\#u{7F}","channel":"c","ts":5,"sender":null,"reply_to":null,"kind":null}"#,
    #"{"id":"x","channel":"c","ts":5,"mentions":null,"category":null,"force":null,"thread":null}"#,
    #" { "id" : "b" , "channel" : "c" ,\#t"ts" : 7 , "mentions" : [ "u2" , "u1" ] } "#,
    #"{"extra":{"deep":[1,{"x":[]}]},"id":"a","channel":"c","ts":5,"more":"x\u00e9"}"#,
    #"{"id":"r1","channel":"c","sender":"u1","ts":"2026-03-08T00:00:03.165Z"}"#,
    #"{"id":"r2","channel":"c","ts":"2024-02-29t23:59:59.9999+05:45","sender":"u2"}"#,
    #"{"ts":"1970-01-01T00:00:00-00:30","id":"r3","channel":"c"}"#,
  ]

  @Test("plain lines take the fast path, with the general parser's results")
  func plainLines() {
    let lines = Self.plain.map { Array($0.utf8) }
    let (fast, plainLines) = parse(lines, plain: true)
    let (general, none) = parse(lines, plain: false)
    #expect(plainLines == lines.count)
    #expect(none == 0)
    #expect(fast.count == lines.count - 2)  // unknown category, unknown channel
    expectSame(fast, general, "plain lines")
  }

  @Test("lines the fast path leaves to the general parser", arguments: TrafficParserTests.rejected)
  func rejectedLines(_ line: String) {
    let lines = [Array(line.utf8)]
    let (fast, plainLines) = parse(lines, plain: true)
    let (general, _) = parse(lines, plain: false)
    #expect(fast.count + fast.rejections.count == 1)
    // Rejected by name only (unknown channel, category): read plainly.
    #expect(plainLines == 0 || fast.count == 0 && general.rejections.count == 1)
    expectSame(fast, general, line)
  }

  @Test(
    "SWAR special bytes: the lowest flag is the first quote, backslash, control or non-ASCII byte")
  func specialBytes() {
    var random = SeededRandom(seed: 7)
    let alphabet: [UInt8] =
      [0x00, 0x01, 0x1F, 0x20, 0x21, 0x22, 0x23, 0x5B, 0x5C, 0x5D, 0x7E, 0x7F]
      + [0x80, 0xC3, 0xFF, 0x41, 0x61]
    for _ in 0..<20_000 {
      let bytes = (0..<8).map { _ in alphabet.randomElement(using: &random)! }
      let word = bytes.enumerated().reduce(UInt64(0)) { $0 | UInt64($1.element) << (8 * $1.offset) }
      let first = bytes.firstIndex { $0 == 0x22 || $0 == 0x5C || $0 < 0x20 || $0 >= 0x80 }
      let flags = JSONScanner.specialBytes(word)
      #expect((flags == 0 ? nil : flags.trailingZeroBitCount / 8) == first, "\(bytes)")
    }
  }

  @Test("randomly damaged lines: both paths keep and reject the same, with the same reasons")
  func damagedLines() {
    var random = SeededRandom(seed: 21)
    // Bytes that change a line's shape: structure, escapes, digits, words,
    // UTF-8 (lead and continuation), control characters, DEL.
    let inserts: [[UInt8]] = [
      [0x22], [0x5C], [0x5C, 0x6E], Array(#"\u00e9"#.utf8), Array(#"\ud800"#.utf8), [0x20], [0x09],
      [0x2C], [0x3A], [0x7B], [0x7D], [0x5B], [0x5D], [0x30], [0x39], [0x2D], [0x2E], [0x65],
      Array("null".utf8), Array("true".utf8), Array(#""ts":3,"#.utf8), Array(#""id":"d","#.utf8),
      [0xC3, 0xA9], [0xC3], [0xA9], [0x01], [0x7F], [0xEF, 0xBB, 0xBF],
    ]
    var lines: [[UInt8]] = []
    for _ in 0..<4_000 {
      var line = Array(Self.plain.randomElement(using: &random)!.utf8)
      for _ in 0..<Int.random(in: 1...3, using: &random) {
        let at = Int.random(in: 0...line.count, using: &random)
        switch Int.random(in: 0..<4, using: &random) {
        case 0 where at < line.count: line.remove(at: at)
        case 1 where at < line.count: line.removeSubrange(at..<min(line.count, at + 4))
        default: line.insert(contentsOf: inserts.randomElement(using: &random)!, at: at)
        }
      }
      lines.append(line)
    }
    let (fast, plainLines) = parse(lines, plain: true)
    let (general, _) = parse(lines, plain: false)
    // Both paths exercised: many damaged lines are still plain, most are not.
    #expect(plainLines > 200)
    #expect(plainLines < lines.count - 1_000)
    #expect(general.rejections.count > 1_000)
    expectSame(fast, general, "damaged lines")
  }

  @Test("a key names a field only when it is the field's name, byte for byte")
  func fieldKeys() {
    func field(_ key: [UInt8]) -> Field? { key.withUnsafeBytes { Field(key: $0) } }
    for expected in Field.all {
      let name = Array(expected.name.utf8)
      #expect(field(name) == expected, "\(expected.name)")
      // Every one-byte change, a byte more or less, a NUL more, and the other case.
      for i in name.indices {
        var changed = name
        changed[i] ^= 0x01
        #expect(field(changed) == nil, "\(changed)")
      }
      #expect(field(Array(name.dropLast())) == nil)
      #expect(field(Array(name.dropFirst())) == nil)
      #expect(field(name + [0]) == nil)
      #expect(field([0] + name) == nil)
      #expect(field(name + name) == nil)
      #expect(field(Array(expected.name.uppercased().utf8)) == nil)
    }
    #expect(field([]) == nil)
    #expect(field(Array("mention_all_and_more".utf8)) == nil)
  }
}
