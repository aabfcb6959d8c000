import FanoutModel
import Testing

@testable import FanoutKernel

@Suite("ByteScratch: a pair's recipient tail")
struct ByteScratchTests {
  @Test("decimals as JSONText writes them, at every length and sign")
  func decimals() {
    var values: [Int64] = [0, 9, 10, 99, 100, 101, 999, 1000, -1, -9, -10, -99, -100, .max, .min]
    var power: Int64 = 1
    for _ in 0..<18 {
      power *= 10
      values += [power - 1, power, power + 1, -power]
    }
    var scratch = ByteScratch(capacity: 4)
    defer { scratch.deallocate() }
    for value in values {
      scratch.removeAll()
      scratch.appendDecimal(value)
      var expected: [UInt8] = []
      JSONText.appendDecimal(value, to: &expected)
      #expect(Array(scratch.bytes) == expected, "\(value)")
      #expect(Array(scratch.bytes) == Array(String(value).utf8), "\(value)")
    }
  }

  @Test("appends of every length from 0 to 40 bytes, across growth")
  func appends() {
    var scratch = ByteScratch(capacity: 4)
    defer { scratch.deallocate() }
    var expected: [UInt8] = []
    for n in 0...40 {
      let bytes = (0..<n).map { UInt8(truncatingIfNeeded: $0 &* 7 &+ n) }
      bytes.withUnsafeBufferPointer { scratch.append(contentsOf: $0) }
      scratch.append(UInt8(ascii: ","))
      expected += bytes + [UInt8(ascii: ",")]
      #expect(Array(scratch.bytes) == expected, "after \(n) bytes")
    }
    scratch.removeAll()
    #expect(scratch.bytes.isEmpty)
  }
}
