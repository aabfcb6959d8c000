import FanoutTestSupport
import Testing

@testable import FanoutSnapshot

@Suite("UTF-8 check")
struct UTF8CheckTests {
  @Test("agrees with Swift's own decoder on every short sequence and on random bytes")
  func agreesWithStandardLibrary() {
    func check(_ bytes: [UInt8]) {
      let ours = bytes.withUnsafeBytes { UTF8Check.isValid($0) }
      let swift = String(validating: bytes, as: UTF8.self) != nil
      #expect(ours == swift, "\(bytes.map { String($0, radix: 16) })")
    }
    // Every one- and two-byte sequence, and every lead byte with each
    // interesting continuation (range edges) in each position.
    for a in 0...255 {
      check([UInt8(a)])
      for b in 0...255 { check([UInt8(a), UInt8(b)]) }
      for b: UInt8 in [0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0] {
        check([UInt8(a), b, 0x80])
        check([UInt8(a), b, 0x80, 0x80])
        check([UInt8(a), 0x80, b, 0x80])
        check([UInt8(a), 0x80, 0x80, b])
      }
    }
    // Longer strings past the eight-byte ASCII fast path.
    var random = SeededRandom(seed: 7)
    for _ in 0..<20_000 {
      let length = Int(random.next() % 24)
      var bytes = (0..<length).map { _ in UInt8(truncatingIfNeeded: random.next() % 128) }
      if length > 0 && random.next() % 2 == 0 {
        bytes[Int(random.next() % UInt64(length))] = UInt8(truncatingIfNeeded: random.next())
      }
      check(bytes)
      check(Array("ascii prefix é€𝄞 then more".utf8) + bytes)
    }
  }

  @Test("valid multi-byte ids and a 64-byte gateway load")
  func accepted() throws {
    let sql =
      SQLiteFixture.header + """
        INSERT INTO users (user_id) VALUES ('é'), ('𝄞'), ('ascii-only-but-longer-than-eight');
        INSERT INTO channels VALUES ('c€', 'group');
        INSERT INTO members VALUES ('c€', 'é'), ('c€', '𝄞');
        INSERT INTO devices VALUES (1, 'é', '\(String(repeating: "g", count: 64))', 't');
        """
    let index = try SnapshotLoader.load(path: SQLiteFixture.make(sql)).index
    #expect(index.users.count == 3)
    #expect(index.gateways[0].utf8.count == 64)
  }
}
