import FanoutIndex
import FanoutKernel
import FanoutModel
import FanoutSnapshot
import FanoutTestSupport
import FanoutTraffic
import Testing

private let index: Index = try! SnapshotLoader.load(
  path: SQLiteFixture.make(
    SQLiteFixture.header + """
      INSERT INTO users (user_id) VALUES ('u1'), ('u2');
      INSERT INTO channels VALUES ('c', 'group');
      INSERT INTO members VALUES ('c', 'u1');
      """)
).index

private func parse(_ lines: [String]) -> MessageBatch { parseTraffic(lines, index: index) }

/// Contract v3's read lines (section 6.2).
@Suite("Traffic parser: read lines")
struct ReadLineTests {
  static let rejected: [String] = [
    #"{"id":"r","event":"read","channel":"c","ts":1}"#,
    #"{"id":"r","event":"read","channel":"c","user":null,"ts":1}"#,
    #"{"id":"r","event":"read","channel":"c","user":7,"ts":1}"#,
    #"{"id":"r","event":"read","channel":"c","user":["u1"],"ts":1}"#,
    #"{"event":"read","channel":"c","user":"u1","ts":1}"#,
    #"{"id":"r","event":"read","user":"u1","ts":1}"#,
    #"{"id":"r","event":"read","channel":"c","user":"u1"}"#,
    #"{"id":"r","event":"read","channel":"c","user":"u1","ts":1.5}"#,
    #"{"id":"r","event":"read","channel":"nope","user":"u1","ts":1}"#,
    #"{"id":"r","event":"Read","channel":"c","user":"u1","ts":1}"#,
    #"{"id":"r","event":"reaction","channel":"c","user":"u1","ts":1}"#,
    #"{"id":"r","event":1,"channel":"c","user":"u1","ts":1}"#,
    #"{"id":"r","event":true,"channel":"c","user":"u1","ts":1}"#,
    #"{"id":"m","event":"","channel":"c","ts":1}"#,
  ]

  @Test("a read line without its fields, or an unknown event, is rejected", arguments: rejected)
  func rejectedLine(_ line: String) {
    let batch = parse([#"{"id":"m0","channel":"c","ts":0}"#, line])
    #expect(batch.rejections.map(\.line) == [2], "\(batch.rejections)")
    #expect(batch.count == 1 && batch.reads.count == 0)
  }

  @Test("read lines are kept beside the messages, in line order, with their reader's row")
  func kept() {
    let batch = parse([
      #"{"id":"m1","channel":"c","ts":1}"#,
      #"{"id":"r1","event":"read","channel":"c","user":"u1","ts":"2026-03-08T07:30:00Z"}"#,
      #"{"id":"r\"2","event":"read","channel":"c","user":"ghost","ts":5,"kind":"bogus","mentions":7}"#,
      #"{"id":"m2","channel":"c","ts":2,"event":"message","user":{"any":"thing"}}"#,
      #"{"id":"m3","channel":"c","ts":3,"event":null,"user":"u2"}"#,
    ])
    #expect(batch.rejections.isEmpty, "\(batch.rejections)")
    #expect(batch.lines == [1, 4, 5])
    #expect(batch.reads.lines == [2, 3])
    #expect(batch.reads.ts == [1_772_955_000_000, 5])
    #expect(batch.reads.user == [index.users.find("u1")!, -1])
    #expect(batch.reads.channel == [0, 0])
    #expect(batch.reads.idJSON.string(1) == #""r\"2""#)
  }

  @Test("a read line of an unknown channel is rejected in line order among the others")
  func rejectionsInOrder() {
    let batch = parse([
      #"{"id":"m1","channel":"x","ts":1}"#,
      #"{"id":"r1","event":"read","channel":"y","user":"u1","ts":1}"#,
      #"{"id":"m2","channel":"z","ts":1}"#,
    ])
    #expect(batch.rejections.map(\.line) == [1, 2, 3])
    #expect(batch.rejections[1].reason == "unknown channel 'y'")
  }
}
