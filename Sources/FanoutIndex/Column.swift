import FanoutModel

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// One of the index's columns: fixed-size values that stay where they are
/// for as long as the column lives, held either by a storage of its own (a
/// raw allocation: a snapshot loaded from SQLite) or by a mapped compiled
/// index file (one read back from the cache: its pages are the file's,
/// shared between the processes that map it, and nothing is copied).
///
/// Reads go straight to `buffer`, valid while this column (or a copy of
/// it) lives: its owner keeps the memory, and only the mutating methods
/// move it — they first give the column storage of its own (copy on write,
/// as an array does), then grow it as an array would.
public struct Column<Element: BitwiseCopyable>: @unchecked Sendable {
  @inlinable public var buffer: UnsafeBufferPointer<Element> { values }
  @usableFromInline var values: UnsafeBufferPointer<Element>
  /// Owns the values when they are the column's own.
  @usableFromInline var storage: ColumnStorage<Element>?
  /// Owns the values when they are a mapped file's.
  @usableFromInline var mapping: MappedFile?

  @inlinable public init() { self.init([]) }

  /// A column holding a copy of `values`.
  @inlinable public init(_ values: [Element]) {
    let storage = values.withUnsafeBufferPointer { ColumnStorage(copying: $0, capacity: $0.count) }
    self.storage = storage
    mapping = nil
    self.values = storage.values
  }

  /// A column of `count` times `value`, to be filled in place
  /// (`withUnsafeMutableBufferPointer`): a builder that knows its size
  /// makes the column directly, with no array to copy.
  @inlinable public init(repeating value: Element, count: Int) {
    let storage = ColumnStorage<Element>(capacity: count)
    storage.base.initialize(repeating: value, count: count)
    storage.count = count
    self.storage = storage
    mapping = nil
    values = storage.values
  }

  /// A column holding `values`, which are left empty (their memory freed
  /// at once: a loader's arrays are not held twice).
  @inlinable public init(taking values: inout [Element]) {
    self.init(values)
    values = []
  }

  /// A column of the values `storage` holds, which it takes over (a
  /// builder's, handed over without a copy).
  @inlinable init(owning storage: ColumnStorage<Element>) {
    self.storage = storage
    mapping = nil
    values = storage.values
  }

  /// The `count` values at byte `offset` of `file` (aligned for `Element`).
  package init(_ file: MappedFile, offset: Int, count: Int) {
    storage = nil
    mapping = file
    values = UnsafeBufferPointer(
      start: (file.base + offset).assumingMemoryBound(to: Element.self), count: count)
  }

  /// The storage to change, the column's own and with room for `capacity`
  /// values; the caller points `values` at it again.
  @inlinable mutating func ownStorage(capacity: Int) -> ColumnStorage<Element> {
    if !isKnownUniquelyReferenced(&storage) {
      storage = ColumnStorage(copying: values, capacity: Swift.max(capacity, values.count))
      mapping = nil
    }
    let own = storage.unsafelyUnwrapped
    own.reserve(capacity)
    return own
  }

  @inlinable public mutating func append(_ value: Element) {
    let own = ownStorage(capacity: values.count + 1)
    own.append(value)
    values = own.values
  }

  @inlinable public mutating func append(contentsOf more: UnsafeBufferPointer<Element>) {
    let own = ownStorage(capacity: values.count + more.count)
    own.append(more)
    values = own.values
  }

  /// Room for `capacity` values in all, allocated (and its pages touched) once.
  @inlinable public mutating func reserveCapacity(_ capacity: Int) {
    values = ownStorage(capacity: capacity).values
  }

  /// Removes every value, keeping the storage when it is the column's own.
  @inlinable public mutating func removeAll() {
    if isKnownUniquelyReferenced(&storage) {
      storage.unsafelyUnwrapped.count = 0
      values = storage.unsafelyUnwrapped.values
    } else {
      self = Column()
    }
  }

  /// Runs `body` on the values, changeable in place (their count is not).
  @inlinable public mutating func withUnsafeMutableBufferPointer<R>(
    _ body: (UnsafeMutableBufferPointer<Element>) throws -> R
  ) rethrows -> R {
    let own = ownStorage(capacity: values.count)
    values = own.values
    return try body(UnsafeMutableBufferPointer(start: own.base, count: own.count))
  }

  /// Whether both hold the same bytes (for integer values: the same values).
  public func sameBytes(as other: Column<Element>) -> Bool {
    // (The same storage is the same bytes: a what-if's B sharing A's ids.)
    buffer.count == other.buffer.count
      && (buffer.isEmpty || buffer.baseAddress == other.buffer.baseAddress
        || memcmp(
          buffer.baseAddress!, other.buffer.baseAddress!,
          buffer.count * MemoryLayout<Element>.stride) == 0)
  }
}

extension Column: JSONByteSink where Element == UInt8 {
  @inlinable public mutating func append(contentsOf bytes: UnsafeRawBufferPointer) {
    let own = ownStorage(capacity: values.count + bytes.count)
    own.append(bytes: bytes)
    values = own.values
  }
}

extension Column: RandomAccessCollection {
  @inlinable public var startIndex: Int { 0 }
  @inlinable public var endIndex: Int { buffer.count }

  @inlinable public subscript(i: Int) -> Element {
    precondition(i >= 0 && i < buffer.count, "Column index out of range")
    return buffer[i]
  }

  /// Lets copies of a column, and of its slices (a pool's strings), go
  /// through memory moves rather than element by element.
  @inlinable public func withContiguousStorageIfAvailable<R>(
    _ body: (UnsafeBufferPointer<Element>) throws -> R
  ) rethrows -> R? { try body(buffer) }

  @inlinable public func withUnsafeBufferPointer<R>(
    _ body: (UnsafeBufferPointer<Element>) throws -> R
  )
    rethrows -> R
  { try body(buffer) }

  @inlinable public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows
    -> R
  {
    try body(UnsafeRawBufferPointer(buffer))
  }
}

extension Column: ExpressibleByArrayLiteral {
  public init(arrayLiteral values: Element...) { self.init(values) }
}

/// A column's own values: a raw allocation, freed with this object, that
/// moves only when it grows (the column then points at its new place).
///
/// Its fields are exempt from Swift's run-time exclusivity checks: a column
/// is changed only through its one owner (`ownStorage` copies a shared
/// one first), and the checks were 4% of a load from SQLite (appending to
/// the id and JSON pools row by row).
@usableFromInline final class ColumnStorage<Element: BitwiseCopyable> {
  @exclusivity(unchecked) @usableFromInline var base: UnsafeMutablePointer<Element>
  @exclusivity(unchecked) @usableFromInline var count: Int
  @exclusivity(unchecked) @usableFromInline var capacity: Int

  /// Room for `capacity` values (at least one: `base` is never nil), none held.
  @inlinable init(capacity: Int) {
    self.capacity = Swift.max(capacity, 1)
    base = UnsafeMutablePointer.allocate(capacity: self.capacity)
    count = 0
  }

  @inlinable convenience init(copying values: UnsafeBufferPointer<Element>, capacity: Int) {
    self.init(capacity: Swift.max(capacity, values.count))
    append(values)
  }

  deinit { base.deallocate() }

  @inlinable var values: UnsafeBufferPointer<Element> {
    UnsafeBufferPointer(start: base, count: count)
  }

  /// Room for `minimum` values; grows by doubling, as an array does, so
  /// that appending one at a time costs amortized constant time. The check
  /// is inlined and the growth is not: called per string by the pools'
  /// builders, a whole `reserve` was not inlined, and each call retained
  /// and released the storage (8% of an audit's samples).
  @inlinable @inline(__always) func reserve(_ minimum: Int) {
    if minimum > capacity { grow(to: minimum) }
  }

  @usableFromInline @inline(never) func grow(to minimum: Int) {
    let grown = Swift.max(minimum, 2 * capacity)
    let moved = UnsafeMutablePointer<Element>.allocate(capacity: grown)
    moved.initialize(from: base, count: count)
    base.deallocate()
    base = moved
    capacity = grown
  }

  // Appending: room already reserved.

  @inlinable func append(_ value: Element) {
    (base + count).initialize(to: value)
    count += 1
  }

  @inlinable func append(_ more: UnsafeBufferPointer<Element>) {
    if let from = more.baseAddress { (base + count).initialize(from: from, count: more.count) }
    count += more.count
  }

  /// `bytes.count` bytes (values of one byte).
  @inlinable func append(bytes: UnsafeRawBufferPointer) {
    if let from = bytes.baseAddress {
      UnsafeMutableRawPointer(base + count).copyMemory(from: from, byteCount: bytes.count)
    }
    count += bytes.count / MemoryLayout<Element>.stride
  }
}

/// A file mapped read-only, unmapped when the last column over it is gone.
@usableFromInline package final class MappedFile: @unchecked Sendable {
  package let base: UnsafeRawPointer
  package let size: Int

  /// Maps `size` bytes of `fd`; nil when the system refuses.
  package init?(fd: Int32, size: Int) {
    guard size > 0 else { return nil }
    let mapped = mmap(nil, size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0)
    guard let mapped, mapped != MAP_FAILED else { return nil }
    base = UnsafeRawPointer(mapped)
    self.size = size
  }

  deinit { munmap(UnsafeMutableRawPointer(mutating: base), size) }
}
