import FanoutIndex
import Testing

@Suite("String table")
struct StringTableTests {
  @Test(
    "ids in insertion order; lookups by bytes, one at a time and in batches",
    arguments: [0, 1, 7, 16, 1_000, 50_000])
  func lookups(_ n: Int) {
    var table = StringTable()
    for i in 0..<n { #expect(table.insert("id-\(i * 7919 % 100_003)") == Int32(i)) }
    #expect(table.insert("id-0") == (n > 0 ? nil : 0))
    let count = table.count
    for i in Swift.stride(from: 0, to: n, by: max(1, n / 100)) {
      #expect(table.find("id-\(i * 7919 % 100_003)") == Int32(i))
    }
    #expect(table.find("missing") == nil)
    var batch = BytePool()
    for i in 0..<min(n, 600) { batch.append("id-\(i * 7919 % 100_003)".utf8) }
    batch.append("missing".utf8)
    var ids: [Int32] = []
    table.find(batch: batch, into: &ids)
    #expect(ids == Array(0..<Int32(min(n, 600))) + [-1])
    #expect(table.count == count)
  }

  /// The batch lookup runs as a pipeline a few dozen keys deep: batches
  /// shorter than it, ending inside it and much longer must all agree with
  /// one lookup at a time, keys present and absent mixed.
  @Test("a batch finds what single lookups find, at every batch size", arguments: [true, false])
  func batchesAgree(sharedLength: Bool) {
    var table = StringTable()
    let present = (0..<5_000).map { i in sharedLength ? "c\(100_000 + i)" : "c\(i)-\(i % 7)" }
    for key in present { _ = table.insert(key) }
    var random = SystemRandomNumberGenerator()
    for size in [1, 2, 15, 16, 17, 31, 32, 33, 47, 48, 49, 64, 100, 1_024, 4_000] {
      let keys = (0..<size).map { _ in
        Int.random(in: 0..<4, using: &random) == 0
          ? "x\(Int.random(in: 0..<1_000_000, using: &random))"
          : present.randomElement(using: &random)!
      }
      var batch = BytePool()
      for key in keys { batch.append(Array(key.utf8)) }
      var ids: [Int32] = []
      table.find(batch: batch, into: &ids)
      #expect(ids == keys.map { table.find($0) ?? -1 }, "\(size) keys")
    }
  }

  @Test("pre-sized tables and sorted appends")
  func capacity() {
    var table = StringTable(capacity: 3)
    for name in ["a", "b", "c", "d", "e"] {
      var name = name
      _ = name.withUTF8 { table.append(UnsafeRawBufferPointer($0)) }
    }
    #expect(table.find("e") == 4)
    #expect(table.find("f") == nil)
  }

  @Test("byte pool comparisons agree with byte order, prefixes and the empty string included")
  func poolComparisons() {
    let words = ["", "a", "ab", "abc", "abd", "b", "\u{00e9}", "u0000001", "u000001"]
    var pool = BytePool()
    for w in words { pool.append(Array(w.utf8)) }
    for (i, w) in words.enumerated() {
      for key in words {
        let keyBytes = Array(key.utf8)
        keyBytes.withUnsafeBytes { raw in
          #expect(pool.equals(i, raw) == (w == key), "\(w) == \(key)")
          #expect(
            pool.precedes(i, raw) == Array(w.utf8).lexicographicallyPrecedes(keyBytes),
            "\(w) < \(key)")
        }
      }
    }
  }

  @Test("a pool appended to another holds both pools' strings, in order, empty ones too")
  func appendPool() {
    let first = ["", "a", "bc"]
    let second = ["def", "", "g"]
    var pool = BytePool()
    for w in first { pool.append(Array(w.utf8)) }
    var more = BytePool()
    for w in second { more.append(Array(w.utf8)) }
    pool.append(contentsOf: more)
    pool.append(contentsOf: BytePool())
    #expect((0..<pool.count).map { pool.string($0) } == first + second)
  }

  @Test("ids of every length up to 40 bytes match only themselves, whichever byte differs")
  func equalityAtEveryLength() {
    let ids = (0...40).map { n in (0..<n).map { UInt8(ascii: "a") + UInt8($0 % 26) } }
    var table = StringTable()
    var pool = BytePool()
    for id in ids {
      id.withUnsafeBytes { _ = table.insert($0) }
      pool.append(id)
    }
    for (n, id) in ids.enumerated() {
      id.withUnsafeBytes {
        #expect(table.find($0) == Int32(n))
        #expect(pool.equals(n, $0))
      }
      for k in 0..<n {  // one byte changed, anywhere
        var other = id
        other[k] ^= 0x20
        other.withUnsafeBytes {
          #expect(table.find($0) == nil, "\(n) bytes, byte \(k) changed")
          #expect(!pool.equals(n, $0))
        }
      }
      var batch = BytePool()
      batch.append(id)
      var found: [Int32] = []
      table.find(batch: batch, into: &found)
      #expect(found == [Int32(n)])
    }
  }

  /// Lookups in a table whose keys share one length skip the offsets; they
  /// must still find exactly the keys present, however the table was made,
  /// and keep doing so once a key of another length joins.
  @Test("keys of one length: found by id times length, and again once lengths differ")
  func sharedLength() {
    let keys = (0..<3_000).map { i in
      let digits = String(i * 7_919 % 1_000_000)
      return "u" + String(repeating: "0", count: 7 - digits.count) + digits
    }
    let absent = ["u000000", "u00000000", "", "v0000000", "u9999999"]
    func expectLookups(_ table: StringTable, _ present: [String], _ label: String) {
      for (id, key) in present.enumerated() {
        #expect(table.find(key) == Int32(id), "\(label) \(key)")
      }
      for key in absent { #expect(table.find(key) == nil, "\(label) \(key)") }
      var batch = BytePool()
      for key in present + absent { batch.append(Array(key.utf8)) }
      var ids: [Int32] = []
      table.find(batch: batch, into: &ids)
      #expect(ids == Array(0..<Int32(present.count)) + absent.map { _ in -1 }, "\(label)")
    }

    var inserted = StringTable()
    for key in keys { _ = inserted.insert(key) }
    expectLookups(inserted, keys, "inserted")
    let indexed = StringTable(indexing: inserted.pool)
    expectLookups(indexed, keys, "indexed")
    let stored = StringTable(pool: inserted.pool, rawSlots: inserted.rawSlots)
    #expect(stored != nil)
    if let stored { expectLookups(stored, keys, "stored") }
    // A stored table is refused with an id past the pool, or a slot missing.
    let slots = Array(inserted.rawSlots)
    let used = slots.indices.filter { slots[$0] != .max }
    for last in [used.first!, used.last!] {
      var pastPool = slots
      pastPool[last] = (pastPool[last] >> 32) << 32 | UInt64(keys.count)
      #expect(StringTable(pool: inserted.pool, rawSlots: Column(pastPool)) == nil)
      var missing = slots
      missing[last] = .max
      #expect(StringTable(pool: inserted.pool, rawSlots: Column(missing)) == nil)
    }

    let mixed = keys + ["x", "u00000001"]
    for key in mixed.suffix(2) { _ = inserted.insert(key) }
    expectLookups(inserted, mixed, "mixed")
    expectLookups(StringTable(indexing: inserted.pool), mixed, "mixed, indexed")
    var firstDiffers = BytePool()
    for key in ["x"] + keys { firstDiffers.append(Array(key.utf8)) }
    expectLookups(StringTable(indexing: firstDiffers), ["x"] + keys, "first differs, indexed")
  }
}
