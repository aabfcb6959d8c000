import CPrefetch
import Glibc

/// A growable array of plain values in an address range of its own, for
/// the ledgers' pools, which grow through a run to hundreds of megabytes
/// and are read at random. The range is reserved once (no memory is
/// committed for it) and committed as the array grows, so growing copies
/// nothing and never holds two copies, the values never move, and the
/// range asks for huge pages: fewer page faults while it grows, fewer TLB
/// misses while it is read. Memory is returned whole when it goes.
///
/// One thread at a time; no bounds are checked in release builds (the
/// indexes are the ledger's own).
final class MappedArray<Element: BitwiseCopyable>: @unchecked Sendable {
  let base: UnsafeMutablePointer<Element>
  private(set) var count = 0
  private var committedBytes = 0
  private let reservedBytes: Int

  /// The most a ledger pool may hold: address space, not memory.
  static var reservation: Int { 1 << 34 }
  /// Memory is committed in steps of a huge page.
  private static var step: Int { 2 << 20 }

  init() {
    reservedBytes = Self.reservation
    let range = mmap(
      nil, reservedBytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)
    guard let range, range != MAP_FAILED else {
      fatalError("cannot reserve \(reservedBytes) bytes of address space: errno \(errno)")
    }
    _ = madvise(range, reservedBytes, MADV_HUGEPAGE)
    base = range.bindMemory(
      to: Element.self, capacity: reservedBytes / MemoryLayout<Element>.stride)
  }

  deinit { munmap(base, reservedBytes) }

  @inline(__always)
  subscript(i: Int) -> Element {
    get {
      assert(i >= 0 && i < count)
      return base[i]
    }
    _modify {
      assert(i >= 0 && i < count)
      yield &base[i]
    }
  }

  @inline(__always)
  func append(_ value: Element) {
    if (count &+ 1) &* MemoryLayout<Element>.stride > committedBytes { commit(count &+ 1) }
    (base + count).initialize(to: value)
    count &+= 1
  }

  func append(repeating value: Element, count n: Int) {
    commit(count &+ n)
    (base + count).initialize(repeating: value, count: n)
    count &+= n
  }

  /// Appends `n` elements whose bytes are all zero, without writing them:
  /// memory committed for the first time reads as zero, and is given pages
  /// only where it is written.
  func appendZeroed(count n: Int) {
    commit(count &+ n)
    count &+= n
  }

  /// Asks for the cache line of element `i`.
  @inline(__always)
  func prefetch(_ i: Int) { cprefetch_read(base + i) }

  /// Commits memory for `elements` elements.
  private func commit(_ elements: Int) {
    let needed = elements &* MemoryLayout<Element>.stride
    guard needed > committedBytes else { return }
    guard needed <= reservedBytes else {
      fatalError("a notification ledger pool outgrew its \(reservedBytes) bytes")
    }
    let target =
      min(reservedBytes, max(needed, 2 &* committedBytes) + Self.step - 1) / Self.step * Self.step
    let start = UnsafeMutableRawPointer(base) + committedBytes
    guard mprotect(start, target &- committedBytes, PROT_READ | PROT_WRITE) == 0 else {
      fatalError("out of memory for the notification ledger (\(target) bytes): errno \(errno)")
    }
    committedBytes = target
  }
}
