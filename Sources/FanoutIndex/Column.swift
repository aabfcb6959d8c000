#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// One of the index's columns: fixed-size values that stay where they are
/// for as long as the column lives, held either by a Swift array (a
/// snapshot loaded from SQLite) or by a mapped compiled index file (one
/// read back from the cache: its pages are the file's, shared between the
/// processes that map it, and nothing is copied).
///
/// Reads go straight to `buffer`. Building through `withArray` copies a
/// mapped or shared column into an array of its own first, as an array's
/// copy-on-write would.
public struct Column<Element: BitwiseCopyable>: @unchecked Sendable {
  /// The values. Valid while this column (or a copy of it) lives: its
  /// owner keeps the memory, and nothing moves it but `withArray`.
  @inlinable public var buffer: UnsafeBufferPointer<Element> { values }
  @usableFromInline var values: UnsafeBufferPointer<Element>
  /// Owns the values when they are an array's: held by this class alone,
  /// never changed but through `withArray`, so its storage stays put.
  @usableFromInline var array: ColumnArray<Element>?
  /// Owns the values when they are a mapped file's.
  @usableFromInline let mapping: MappedFile?

  @inlinable public init() { self.init([]) }

  @inlinable public init(_ values: [Element]) {
    let array = ColumnArray(values)
    self.array = array
    mapping = nil
    self.values = array.buffer
  }

  /// The `count` values at byte `offset` of `file` (aligned for `Element`).
  package init(_ file: MappedFile, offset: Int, count: Int) {
    array = nil
    mapping = file
    values = UnsafeBufferPointer(
      start: (file.base + offset).assumingMemoryBound(to: Element.self), count: count)
  }

  /// Runs `body` on the values as an array of this column's own, then
  /// keeps the result (the builders' way of making a column).
  @inlinable public mutating func withArray<R>(_ body: (inout [Element]) throws -> R) rethrows -> R
  {
    if !isKnownUniquelyReferenced(&array) {
      array = ColumnArray(Array(values))
    }
    return try array.unsafelyUnwrapped.update(&values, body)
  }

  /// Whether both hold the same bytes (for integer values: the same values).
  public func sameBytes(as other: Column<Element>) -> Bool {
    buffer.count == other.buffer.count
      && (buffer.isEmpty
        || memcmp(
          buffer.baseAddress!, other.buffer.baseAddress!,
          buffer.count * MemoryLayout<Element>.stride) == 0)
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

/// An array a column owns. Its elements never move while it is not
/// mutated, and only `Column.withArray` mutates it.
@usableFromInline final class ColumnArray<Element: BitwiseCopyable> {
  /// (Unchecked: only `Column.withArray` accesses it, never reentrantly.)
  @exclusivity(unchecked) @usableFromInline var values: [Element]
  @inlinable init(_ values: [Element]) { self.values = values }
  @inlinable var buffer: UnsafeBufferPointer<Element> { values.withUnsafeBufferPointer { $0 } }

  /// Runs `body` on the array, then points `view` at its values.
  @inlinable func update<R>(
    _ view: inout UnsafeBufferPointer<Element>, _ body: (inout [Element]) throws -> R
  ) rethrows -> R {
    defer { view = buffer }
    return try body(&values)
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
