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
      INSERT INTO users (user_id) VALUES ('u1'), ('u2'), ('u3');
      INSERT INTO channels VALUES ('c', 'group');
      INSERT INTO categories VALUES ('news', 'opt_in', 0);
      """)
).index

private func parse(_ lines: [String]) -> MessageBatch { parseTraffic(lines, index: index) }

@Suite("Traffic parser")
struct TrafficParserTests {
  static let rejected: [String] = [
    #"not json"#,
    #"{"id":"m","channel":"c","ts":1"#,
    #"{"id":"m","channel":"c","ts":1}x"#,
    #"["id","m"]"#,
    #"{"channel":"c","ts":1}"#,
    #"{"id":"m","ts":1}"#,
    #"{"id":"m","channel":"c"}"#,
    #"{"id":null,"channel":"c","ts":1}"#,
    #"{"id":7,"channel":"c","ts":1}"#,
    #"{"id":"m","channel":"c","ts":1.0}"#,
    #"{"id":"m","channel":"c","ts":1e3}"#,
    #"{"id":"m","channel":"c","ts":1E+3}"#,
    #"{"id":"m","channel":"c","ts":"1000"}"#,
    #"{"id":"m","channel":"c","ts":"2026-03-08T07:30:00"}"#,
    #"{"id":"m","channel":"c","ts":"2026-02-30T07:30:00Z"}"#,
    #"{"id":"m","channel":"c","ts":"2026-03-08 07:30:00Z"}"#,
    #"{"id":"m","channel":"c","ts":"2026-03-08T24:00:00Z"}"#,
    #"{"id":"m","channel":"c","ts":"2026-03-08T07:30:00+0100"}"#,
    #"{"id":"m","channel":"c","ts":true}"#,
    #"{"id":"m","channel":"c","ts":99999999999999999999}"#,
    #"{"id":"m","channel":"c","ts":01}"#,
    #"{"id":"m","channel":"c","ts":1,"kind":"reaction"}"#,
    #"{"id":"m","channel":"c","ts":1,"kind":"Message"}"#,
    #"{"id":"m","channel":"c","ts":1,"kind":3}"#,
    #"{"id":"m","channel":"nope","ts":1}"#,
    #"{"id":"m","channel":"c","ts":1,"category":"promo"}"#,
    #"{"id":"m","channel":"c","ts":1,"mentions":"u1"}"#,
    #"{"id":"m","channel":"c","ts":1,"mentions":["u1",2]}"#,
    #"{"id":"m","channel":"c","ts":1,"mention_all":"yes"}"#,
    #"{"id":"m","channel":"c","ts":1,"force":1}"#,
    #"{"id":"m","channel":"c","ts":1,"sender":5}"#,
    #"{"id":"m","channel":"c","ts":1,"reply_to":["u1"]}"#,
    #"{"id":"m","channel":"c","ts":1,"silent":"true"}"#,
    #"{"id":"m","channel":"c","ts":1,"silent":0}"#,
    #"{"id":"m","channel":"c","ts":1,"thread":7}"#,
    #"{"id":"m","channel":"c","ts":1,"thread":["t"]}"#,
    #"{"id":"m\u0001","channel":"c","ts":1,"x":"\ud800"}"#,
    "{\"id\":\"m\u{1}\",\"channel\":\"c\",\"ts\":1}",
  ]

  @Test("rejected lines are reported with their number and skipped", arguments: rejected)
  func rejects(_ line: String) {
    let batch = parse([#"{"id":"ok","channel":"c","ts":1}"#, line])
    #expect(batch.count == 1, "accepted: \(line)")
    #expect(batch.rejections.map(\.line) == [2])
  }

  @Test("invalid UTF-8 is rejected")
  func invalidUTF8() {
    var parser = TrafficParser(index: index)
    var bytes = Array(#"{"id":"m","channel":"c","ts":1}"#.utf8)
    bytes[7] = 0xFF
    bytes.withUnsafeMutableBytes { parser.parse(UnsafeRawBufferPointer($0), line: 1) }
    let batch = parser.finish()
    #expect(batch.rejections.count == 1)
  }

  @Test(
    "optional fields: null means absent, unknown fields and users are ignored, last duplicate key wins"
  )
  func lenient() {
    let batch = parse([
      #"{"id":"a","channel":"c","ts":5,"sender":null,"kind":null,"mentions":null,"mention_all":null,"reply_to":null,"category":null,"force":null,"extra":{"deep":[1,{"x":[]}]}}"#,
      #" { "id" : "b" , "channel" : "c" , "ts" : -5 , "sender" : "ghost" , "mentions" : [ "u3" , "zed" , "u1" , "u3" ] , "reply_to" : "u2" , "kind" : "pinned" , "category" : "news" , "force" : true , "mention_all" : true } "#,
      #"{"id":"c","channel":"c","ts":1,"ts":2,"kind":"call"}"#,
      "",
      "   ",
    ])
    #expect(batch.count == 3)
    #expect(batch.rejections.isEmpty)
    #expect(batch.lines == [1, 2, 3])
    #expect(batch.sender == [-1, -1, -1])
    #expect(batch.kind == [.message, .pinned, .call])
    #expect(batch.ts == [5, -5, 2])
    #expect(Array(batch.mentions(of: 1)) == [0, 2])  // sorted, unique, unknown dropped
    #expect(batch.replyTo == [-1, 1, -1])
    #expect(batch.category == [-1, 0, -1])
    #expect(batch.force == [false, true, false])
    #expect(batch.mentionAll == [false, true, false])
  }

  @Test("contract v2 fields: silent, and thread (\"\" is a thread, null is none)")
  func v2Fields() {
    let batch = parse([
      #"{"id":"a","channel":"c","ts":1,"silent":true,"thread":""}"#,
      #"{"id":"b","channel":"c","ts":1,"silent":null,"thread":null}"#,
      #"{"id":"c","channel":"c","ts":1,"silent":false,"thread":"t\u00e9"}"#,
    ])
    #expect(batch.rejections.isEmpty)
    #expect(batch.silent == [true, false, false])
    #expect(batch.hasThread == [true, false, true])
    #expect(batch.thread.string(0) == "")
    #expect(batch.thread.string(2) == "té")
  }

  @Test("names looked up per batch: rejections in line order, the kept messages' columns aligned")
  func lookupsPerBatch() {
    let batch = parse([
      #"{"id":"m1","channel":"c","ts":1,"sender":"u3","mentions":["u2"]}"#,
      #"{"id":"m2","channel":"gone","ts":2,"sender":"u1","mentions":["u1"]}"#,
      #"not json"#,
      #"{"id":"m4","channel":"gone","ts":4,"category":"promo"}"#,
      #"{"id":"m5","channel":"c","ts":5,"category":"promo","sender":"u2"}"#,
      #"{"id":"m6","channel":"c","ts":6,"sender":"u2","reply_to":"u1","mentions":["u3","u1"]}"#,
      #"{"id":"m7","channel":"c","ts":"soon"}"#,
    ])
    #expect(batch.rejections.map(\.line) == [2, 3, 4, 5, 7])
    #expect(batch.rejections[0].reason == "unknown channel 'gone'")
    #expect(batch.rejections[2].reason == "unknown channel 'gone'")  // before its category
    #expect(batch.rejections[3].reason == "unknown category 'promo'")
    #expect(batch.lines == [1, 6])
    #expect(batch.idJSON.string(0) == #""m1""#)
    #expect(batch.idJSON.string(1) == #""m6""#)
    #expect(batch.ts == [1, 6])
    #expect(batch.sender == [2, 1])
    #expect(batch.replyTo == [-1, 0])
    #expect(Array(batch.mentions(of: 0)) == [1])
    #expect(Array(batch.mentions(of: 1)) == [0, 2])
  }

  @Test("RFC 3339 times: offsets, lower case, fractions truncated to the millisecond")
  func rfc3339() {
    let batch = parse([
      #"{"id":"a","channel":"c","ts":"2026-03-08T07:30:00Z"}"#,
      #"{"id":"b","channel":"c","ts":"2026-03-08T15:30:00+08:00"}"#,
      #"{"id":"c","channel":"c","ts":"2026-03-08t02:30:00.9999-05:00"}"#,
      #"{"id":"d","channel":"c","ts":"1969-12-31T23:59:59.5z"}"#,
      #"{"id":"e","channel":"c","ts":"2024-02-29T00:00:00.123456789Z"}"#,
    ])
    #expect(batch.rejections.isEmpty)
    #expect(
      batch.ts == [
        1_772_955_000_000, 1_772_955_000_000, 1_772_955_000_999, -500, 1_709_164_800_123,
      ])
  }

  @Test("message ids are echoed as JSON, escapes normalised")
  func ids() {
    let batch = parse([
      #"{"id":"q\"\u00e9\/\n","channel":"c","ts":1}"#,
      // Runs of plain text around escapes and multi-byte characters, in a
      // key and a skipped value too.
      #"{"ignored key ab\u0063":"xy\tz é€😀 end","id":"ab\\cd é€😀 \ud83d\ude00 tail","channel":"c","ts":2}"#,
    ])
    #expect(String(decoding: batch.idJSON[0], as: UTF8.self) == #""q\"é/\n""#)
    #expect(String(decoding: batch.idJSON[1], as: UTF8.self) == #""ab\\cd é€😀 😀 tail""#)
  }
}
