import FanoutIndex
import Testing

/// A column owns its values: growing moves them but keeps them, and a copy
/// changed in any way (append, in place, emptied) leaves the other as it was.
@Suite("Column")
struct ColumnTests {
  @Test("appending one at a time and in runs keeps every value through growth")
  func growth() {
    var column = Column<Int>()
    var expected: [Int] = []
    for i in 0..<10_000 {
      column.append(i &* 31)
      expected.append(i &* 31)
      if i % 1_000 == 0 {
        let run = Array(0..<(i % 7 + 1))
        run.withUnsafeBufferPointer { column.append(contentsOf: $0) }
        expected += run
      }
    }
    #expect(Array(column) == expected)
    #expect(column.buffer.count == expected.count)
  }

  @Test("a copy changed by append, in place or by removeAll leaves the original as it was")
  func copyOnWrite() {
    let original = Column<Int32>([1, 2, 3])
    var appended = original
    appended.append(4)
    var changed = original
    changed.withUnsafeMutableBufferPointer { $0[0] = 9 }
    var emptied = original
    emptied.removeAll()
    #expect(Array(original) == [1, 2, 3])
    #expect(Array(appended) == [1, 2, 3, 4])
    #expect(Array(changed) == [9, 2, 3])
    #expect(emptied.isEmpty)
    // The changed copy reads its own values, not the original's.
    #expect(changed.buffer.baseAddress != original.buffer.baseAddress)
  }

  @Test("built in place, and taken from an array that is left empty")
  func building() {
    var column = Column<Int64>(repeating: -1, count: 5)
    column.withUnsafeMutableBufferPointer { values in
      for i in values.indices where i % 2 == 0 { values[i] = Int64(i) }
    }
    #expect(Array(column) == [0, -1, 2, -1, 4])
    var array: [Int64] = [7, 8]
    let taken = Column(taking: &array)
    #expect(array.isEmpty)
    #expect(Array(taken) == [7, 8])
    var bytes = Column<UInt8>()
    [UInt8]("ab".utf8).withUnsafeBytes { bytes.append(contentsOf: $0) }
    #expect(Array(bytes) == [UInt8]("ab".utf8))
  }
}
