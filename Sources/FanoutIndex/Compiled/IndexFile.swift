import CChecksum
import Dispatch
import FanoutModel

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// The compiled index's file: a header, then sections, each a run of
/// fixed-size values with its own checksum, then a trailer.
///
///     "FANOUTIX" | format version (UInt32) | 0 (UInt32)
///     per section: number (UInt32) | value size (UInt32) | bytes (UInt64)
///                  | checksum (UInt64) | the bytes, padded to 8
///     "FANOUTIX" | section count (UInt64)
///
/// Values are in the machine's byte order, as the columns are in memory; a
/// file is only ever read by the build that wrote it (its key says so). The
/// sections are read back in the order they were written: the numbers and
/// value sizes catch a reader and writer that disagree, the checksums a
/// file changed or cut short since.
public enum IndexFile {
  /// Bump whenever what is written, or how the index is built, changes.
  public static let formatVersion: UInt32 = 5
  package static let magic: [UInt8] = Array("FANOUTIX".utf8)
  static let sectionHeaderBytes = 24

  /// A fast 64-bit checksum (`fanout_checksum`: eight lanes whose
  /// multiplies the compiler vectorizes): catches corruption and
  /// truncation, not tampering.
  package static func checksum(_ bytes: UnsafeRawBufferPointer) -> UInt64 {
    fanout_checksum(bytes.baseAddress, bytes.count)
  }
}

/// Why a compiled index file cannot be used; it is then rebuilt, never trusted.
public struct IndexFileError: Error, Sendable, CustomStringConvertible {
  public let reason: String
  public init(_ reason: String) { self.reason = reason }
  public var description: String { reason }
}

/// Writes a compiled index file section by section to an open descriptor.
package struct IndexFileWriter {
  private let fd: Int32
  private var sections: UInt32 = 0

  package init(fd: Int32) throws(SystemCallError) {
    self.fd = fd
    var header = IndexFile.magic
    withUnsafeBytes(of: IndexFile.formatVersion) { header += $0 }
    header += [0, 0, 0, 0]
    try raw(header)
  }

  /// Writes `values` as one section.
  package mutating func write<T: BitwiseCopyable>(_ values: [T]) throws(SystemCallError) {
    try write(Column(values))
  }

  /// Writes `values` as one section.
  package mutating func write<T: BitwiseCopyable>(_ values: Column<T>) throws(SystemCallError) {
    try section(UnsafeRawBufferPointer(values.buffer), valueSize: MemoryLayout<T>.stride)
  }

  package mutating func write(_ value: Int64) throws(SystemCallError) { try write([value]) }

  package mutating func write(_ text: String) throws(SystemCallError) {
    try write(Array(text.utf8))
  }

  package mutating func write(_ pool: BytePool) throws(SystemCallError) {
    try write(pool.bytes)
    try write(pool.offsets)
  }

  package mutating func write(_ table: StringTable) throws(SystemCallError) {
    try write(table.pool)
    try write(table.rawSlots)
  }

  /// Ends the file; the caller then syncs and renames it.
  package mutating func finish() throws(SystemCallError) {
    var trailer = IndexFile.magic
    withUnsafeBytes(of: UInt64(sections)) { trailer += $0 }
    try raw(trailer)
  }

  private mutating func section(_ bytes: UnsafeRawBufferPointer, valueSize: Int)
    throws(SystemCallError)
  {
    var header: [UInt8] = []
    header.reserveCapacity(IndexFile.sectionHeaderBytes)
    withUnsafeBytes(of: sections) { header += $0 }
    withUnsafeBytes(of: UInt32(valueSize)) { header += $0 }
    withUnsafeBytes(of: UInt64(bytes.count)) { header += $0 }
    withUnsafeBytes(of: IndexFile.checksum(bytes)) { header += $0 }
    try raw(header)
    try write(bytes)
    try raw([UInt8](repeating: 0, count: (8 - bytes.count % 8) % 8))
    sections += 1
  }

  private func raw(_ bytes: [UInt8]) throws(SystemCallError) {
    var failure: SystemCallError?
    bytes.withUnsafeBytes { bytes in
      do throws(SystemCallError) { try write(bytes) } catch { failure = error }
    }
    if let failure { throw failure }
  }

  private func write(_ bytes: UnsafeRawBufferPointer) throws(SystemCallError) {
    var done = 0
    while done < bytes.count {
      let chunk = min(bytes.count - done, 1 << 30)
      try writeAll(fd, UnsafeRawBufferPointer(rebasing: bytes[done..<(done + chunk)]))
      done += chunk
    }
  }
}

/// Reads a compiled index file written by `IndexFileWriter`, checking each
/// section's number, value size and bounds, and its checksum. The file is
/// mapped, and large sections become columns over its pages: nothing is
/// copied, and processes reading one file share its pages.
package struct IndexFileReader {
  private let file: MappedFile
  private var offset = 16
  private var sections: UInt32 = 0
  /// Each section's checksum by section number, computed when the second
  /// section is asked for: the first (the key a file is accepted by) is
  /// summed alone, so that a file for another state is refused without
  /// reading the rest; the rest are summed on two cores at once.
  private var sums: [UInt64] = []

  /// Maps the file open on `fd` (which may be closed afterwards); checks the header.
  package init(fd: Int32) throws(IndexFileError) {
    var st = stat()
    guard fstat(fd, &st) == 0 else { throw IndexFileError("cannot stat the file") }
    guard st.st_size >= 32 else { throw IndexFileError("cut short (\(st.st_size) bytes)") }
    guard let file = MappedFile(fd: fd, size: Int(st.st_size)) else {
      throw IndexFileError("cannot map the file: \(String(cString: strerror(errno)))")
    }
    self.file = file
    guard UnsafeRawBufferPointer(start: file.base, count: 8).elementsEqual(IndexFile.magic) else {
      throw IndexFileError("not a compiled Fanout index")
    }
    let version = file.base.loadUnaligned(fromByteOffset: 8, as: UInt32.self)
    guard version == IndexFile.formatVersion else {
      throw IndexFileError("format version \(version), this build reads \(IndexFile.formatVersion)")
    }
  }

  /// The checksums of the sections the headers describe, as far as they
  /// stay inside the file (the reads check the rest).
  private static func sums(of file: MappedFile) -> [UInt64] {
    var sections: [Range<Int>] = []
    var offset = 16
    while offset + IndexFile.sectionHeaderBytes <= file.size {
      let byteCount = (file.base + offset).loadUnaligned(fromByteOffset: 8, as: UInt64.self)
      let start = offset + IndexFile.sectionHeaderBytes
      guard byteCount <= UInt64(file.size - start) else { break }
      sections.append(start..<(start + Int(byteCount)))
      offset = start + Int(byteCount) + (8 - Int(byteCount) % 8) % 8
    }
    // Two shares of about equal bytes: each next largest section to the lighter one.
    var shares: [[Int]] = [[], []]
    var loads = [0, 0]
    for i in sections.indices.sorted(by: { sections[$0].count > sections[$1].count }) {
      let lighter = loads[0] <= loads[1] ? 0 : 1
      shares[lighter].append(i)
      loads[lighter] += sections[i].count
    }
    let sums = UnsafeMutableBufferPointer<UInt64>.allocate(capacity: sections.count)
    defer { sums.deallocate() }
    let (lists, ranges) = (shares, sections)
    // (Each iteration writes its own sections' slots only.)
    nonisolated(unsafe) let slots = sums
    DispatchQueue.concurrentPerform(iterations: 2) { share in
      for i in lists[share] {
        slots[i] = IndexFile.checksum(
          UnsafeRawBufferPointer(start: file.base + ranges[i].lowerBound, count: ranges[i].count))
      }
    }
    return Array(sums)
  }

  /// The next section's values, over the file's pages.
  package mutating func column<T: BitwiseCopyable>(_: T.Type = T.self) throws(IndexFileError)
    -> Column<T>
  {
    guard offset + IndexFile.sectionHeaderBytes <= file.size else {
      throw IndexFileError("cut short at section \(sections)")
    }
    let header = file.base + offset
    let number = header.loadUnaligned(as: UInt32.self)
    let valueSize = header.loadUnaligned(fromByteOffset: 4, as: UInt32.self)
    let byteCount = header.loadUnaligned(fromByteOffset: 8, as: UInt64.self)
    let checksum = header.loadUnaligned(fromByteOffset: 16, as: UInt64.self)
    let stride = MemoryLayout<T>.stride
    guard number == sections, Int(valueSize) == stride else {
      throw IndexFileError("section \(sections) is not the one expected here")
    }
    // Sections start 8-aligned in a page-aligned mapping: aligned for T.
    let start = offset + IndexFile.sectionHeaderBytes
    guard byteCount <= UInt64(file.size - start), Int(byteCount) % stride == 0,
      MemoryLayout<T>.alignment <= 8
    else {
      throw IndexFileError("cut short in section \(sections)")
    }
    let bytes = UnsafeRawBufferPointer(start: file.base + start, count: Int(byteCount))
    if number == 1 && sums.isEmpty { sums = Self.sums(of: file) }
    let sum = Int(number) < sums.count ? sums[Int(number)] : IndexFile.checksum(bytes)
    guard sum == checksum else {
      throw IndexFileError("section \(sections) fails its checksum")
    }
    offset = start + Int(byteCount) + (8 - Int(byteCount) % 8) % 8
    sections += 1
    return Column(file, offset: start, count: Int(byteCount) / stride)
  }

  /// The next section's values, copied into an array (small sections, and
  /// those converted value by value).
  package mutating func read<T: BitwiseCopyable>(_: T.Type = T.self) throws(IndexFileError) -> [T] {
    Array(try column(T.self))
  }

  /// The next section's bytes as values of a `UInt8` enum, each checked.
  package mutating func read<T: RawRepresentable>(enumOf _: T.Type) throws(IndexFileError) -> [T]
  where T.RawValue == UInt8 {
    let raw: [UInt8] = try read()
    var values: [T] = []
    values.reserveCapacity(raw.count)
    for byte in raw {
      guard let value = T(rawValue: byte) else {
        throw IndexFileError("section \(sections - 1): \(byte) is not a \(T.self)")
      }
      values.append(value)
    }
    return values
  }

  /// The next section's bytes as 0/1 flags, each checked.
  package mutating func readFlags() throws(IndexFileError) -> [Bool] {
    let raw: [UInt8] = try read()
    guard raw.allSatisfy({ $0 <= 1 }) else {
      throw IndexFileError("section \(sections - 1): a flag is not 0 or 1")
    }
    return raw.map { $0 == 1 }
  }

  package mutating func readInt() throws(IndexFileError) -> Int64 {
    let values: [Int64] = try read()
    guard values.count == 1 else { throw IndexFileError("section \(sections - 1): not one value") }
    return values[0]
  }

  package mutating func readString() throws(IndexFileError) -> String {
    String(decoding: try read(UInt8.self), as: UTF8.self)
  }

  package mutating func readPool() throws(IndexFileError) -> BytePool {
    let bytes: Column<UInt8> = try column()
    let offsets: Column<Int> = try column()
    guard let pool = BytePool(bytes: bytes, offsets: offsets) else {
      throw IndexFileError("section \(sections - 1): string offsets out of order")
    }
    return pool
  }

  package mutating func readTable() throws(IndexFileError) -> StringTable {
    let pool = try readPool()
    let slots: Column<UInt64> = try column()
    guard let table = StringTable(pool: pool, rawSlots: slots) else {
      throw IndexFileError("section \(sections - 1): a string table's slots are inconsistent")
    }
    return table
  }

  /// Checks the trailer: every section was read, and the file ends there.
  package func finish() throws(IndexFileError) {
    guard offset + 16 == file.size,
      UnsafeRawBufferPointer(start: file.base + offset, count: 8).elementsEqual(IndexFile.magic),
      file.base.loadUnaligned(fromByteOffset: offset + 8, as: UInt64.self) == UInt64(sections)
    else { throw IndexFileError("the trailer does not close the \(sections) sections read") }
  }
}
