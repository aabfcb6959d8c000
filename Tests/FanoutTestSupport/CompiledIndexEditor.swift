import FanoutIndex
import Foundation

/// A compiled index file's sections, to change as an attacker would: a
/// section's values rewritten and its checksum computed again, so that only
/// the reader's validation stands between the file and the kernel.
public struct CompiledIndexEditor {
  public var bytes: [UInt8]
  /// Each section's payload, by section number.
  public private(set) var payloads: [Range<Int>] = []

  public init(bytes: [UInt8]) {
    self.bytes = bytes
    var offset = 16
    while offset + 24 <= bytes.count - 16 {
      let count = Int(load(UInt64.self, at: offset + 8))
      let start = offset + 24
      guard count <= bytes.count - start else { break }
      payloads.append(start..<(start + count))
      offset = start + count + (8 - count % 8) % 8
    }
  }

  public init?(path: String) {
    guard let data = FileManager.default.contents(atPath: path) else { return nil }
    self.init(bytes: Array(data))
  }

  func load<T: FixedWidthInteger>(_: T.Type, at offset: Int) -> T {
    bytes.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: offset, as: T.self) }
  }

  /// The values of section `section`, read as `T`.
  public func values<T: FixedWidthInteger>(_ section: Int, as _: T.Type = T.self) -> [T] {
    let range = payloads[section]
    return stride(from: range.lowerBound, to: range.upperBound, by: MemoryLayout<T>.size).map {
      load(T.self, at: $0)
    }
  }

  /// Sets value `index` of section `section` to `value`, and its checksum to match.
  public mutating func set<T: FixedWidthInteger>(_ section: Int, _ index: Int, to value: T) {
    let at = payloads[section].lowerBound + index * MemoryLayout<T>.size
    withUnsafeBytes(of: value) { raw in
      for (k, byte) in raw.enumerated() { bytes[at + k] = byte }
    }
    resum(section)
  }

  /// Sets byte `offset` of section `section`'s payload to `value`, checksum matched.
  public mutating func setByte(_ section: Int, _ offset: Int, to value: UInt8) {
    bytes[payloads[section].lowerBound + offset] = value
    resum(section)
  }

  /// Computes section `section`'s checksum again over its payload.
  public mutating func resum(_ section: Int) {
    let range = payloads[section]
    let sum = bytes.withUnsafeBytes { raw in
      IndexFile.checksum(UnsafeRawBufferPointer(rebasing: raw[range]))
    }
    let at = range.lowerBound - 8
    withUnsafeBytes(of: sum) { raw in
      for (k, byte) in raw.enumerated() { bytes[at + k] = byte }
    }
  }

  public func write(to path: String) {
    _ = FileManager.default.createFile(atPath: path, contents: Data(bytes))
  }
}
