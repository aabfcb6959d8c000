import CPrefetch
import Dispatch
import FanoutModel
import Glibc
import Synchronization

/// A growable array of plain values in an address range of its own, for
/// the ledgers' pools (rule 8's throttle, contract v3's notifications),
/// which grow through a run to hundreds of megabytes and are read at
/// random. The range is reserved ahead (address space, no
/// memory) and committed as the array grows, so growing copies nothing and
/// never holds two copies. Where the address space is limited (`ulimit
/// -v`), or where thousands of pools live at once (partitions of many
/// what-if sides), a smaller range is reserved, and an array that outgrows
/// its range moves to one twice the size (one copy, as an `Array` grows):
/// `base` is valid until the next append.
///
/// It asks for ordinary pages, not huge ones: on the 2-core virtual
/// machines measured, a huge page's first touch (2 MB zeroed; slow there,
/// probably memory the host had to supply afresh) cost more than the TLB
/// misses it saved (docs/performance.md, Contract v3).
///
/// One thread at a time; no bounds are checked in release builds (the
/// indexes are the ledger's own).
final class MappedArray<Element: BitwiseCopyable>: @unchecked Sendable {
  private(set) var base: UnsafeMutablePointer<Element>
  private(set) var count = 0
  private var committedBytes = 0
  /// The committed bytes given their pages (`prepare`), from the start.
  private var populatedBytes = 0
  private var reservedBytes: Int
  /// The ledger the array belongs to, named when the system refuses it memory.
  let ledger: LedgerName

  /// The address space a pool asks for first.
  static var reservation: Int { 1 << 34 }
  /// Memory is committed in steps of 2 MB (few `mprotect` calls as it grows).
  private static var step: Int { 2 << 20 }

  /// - Parameter reservation: the address space asked for first; under a
  ///   limit on the process's address space, at most 1/64 of it.
  init(_ ledger: LedgerName, reservation: Int = MappedArray.reservation) {
    self.ledger = ledger
    let share = unreservedAddressSpace.load(ordering: .relaxed) / 64
    (base, reservedBytes) = Self.reserve(
      atLeast: Self.step, hoping: min(reservation, Self.addressSpaceLimit / 64, share),
      for: ledger)
    unreservedAddressSpace.subtract(reservedBytes, ordering: .relaxed)
  }

  /// The process's address space limit (`ulimit -v`), or `Int.max`.
  private static var addressSpaceLimit: Int {
    var limit = rlimit()
    guard getrlimit(__rlimit_resource_t(RLIMIT_AS.rawValue), &limit) == 0,
      limit.rlim_cur != rlim_t.max
    else { return .max }
    return Int(clamping: limit.rlim_cur)
  }

  deinit {
    munmap(base, reservedBytes)
    unreservedAddressSpace.add(reservedBytes, ordering: .relaxed)
  }

  /// A range of `hoped` bytes of address space, or as much as the system
  /// grants down to `needed`.
  private static func reserve(atLeast needed: Int, hoping hoped: Int, for ledger: LedgerName) -> (
    UnsafeMutablePointer<Element>, Int
  ) {
    var bytes = max(hoped, needed)
    while true {
      let range = mmap(
        nil, bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0)
      if let range, range != MAP_FAILED {
        return (
          range.bindMemory(to: Element.self, capacity: bytes / MemoryLayout<Element>.stride),
          bytes
        )
      }
      guard bytes / 2 >= needed else {
        ledgerOutOfMemory(ledger, "could not reserve \(needed) bytes of address space")
      }
      bytes /= 2
    }
  }

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
    if (count &+ 1) &* MemoryLayout<Element>.stride > populatedBytes { prepare(count &+ 1) }
    (base + count).initialize(to: value)
    count &+= 1
  }

  func append(repeating value: Element, count n: Int) {
    prepare(count &+ n)
    (base + count).initialize(repeating: value, count: n)
    count &+= n
  }

  /// Commits memory for `elements` elements, and gives the steps they
  /// reach their pages in one call each (`MADV_POPULATE_WRITE`): a fresh
  /// page costs less so than by a fault on its first write, each of which
  /// the kernel handles on its own (docs/performance.md, Fresh pages).
  /// A small array's pages come as it doubles, from 64 KB, so that an
  /// array barely used (a ledger's partition that got few users) does not
  /// hold a whole step.
  @inline(never)
  private func prepare(_ elements: Int) {
    commit(elements)
    let needed = elements &* MemoryLayout<Element>.stride
    guard needed > populatedBytes else { return }
    // (Not the pages of `appendZeroed` elements before: they get theirs where written.)
    let from = max(populatedBytes, count &* MemoryLayout<Element>.stride / Self.page * Self.page)
    let unit = populatedBytes < Self.step ? max(populatedBytes, Self.firstPages) : Self.step
    let end = min(committedBytes, (needed + unit - 1) / unit * unit)
    // Where the kernel cannot (before Linux 5.14), pages come on first use.
    _ = madvise(UnsafeMutableRawPointer(base) + from, end &- from, MADV_POPULATE_WRITE)
    populatedBytes = end
  }

  /// Empties the array, keeping its memory for what is appended next.
  func removeAll() { count = 0 }

  /// Appends `n` elements whose bytes are all zero, without writing them:
  /// memory committed for the first time reads as zero, and is given pages
  /// only where it is written.
  func appendZeroed(count n: Int) {
    commit(count &+ n)
    count &+= n
  }

  /// Gives the memory committed so far its pages now, `threads` parts at
  /// a time, for an array that is read before it is written at random:
  /// a page first read maps the shared zero page, and the write that
  /// follows would fault again and flush the other threads' TLBs.
  func populate(threads: Int) {
    populatedBytes = committedBytes
    let pages = committedBytes / Self.page
    let parts = max(1, min(threads, pages))
    let start = UInt(bitPattern: base)
    DispatchQueue.concurrentPerform(iterations: parts) { k in
      let first = pages * k / parts
      let end = pages * (k + 1) / parts
      // Where the kernel cannot (before Linux 5.14), pages come on first use.
      _ = madvise(
        UnsafeMutableRawPointer(bitPattern: start + UInt(first * Self.page)),
        (end - first) * Self.page, MADV_POPULATE_WRITE)
    }
  }

  private static var page: Int { 4096 }
  private static var firstPages: Int { 64 << 10 }

  /// Asks for the cache line of element `i`.
  @inline(__always)
  func prefetch(_ i: Int) { cprefetch_read(base + i) }

  /// Commits memory for `elements` elements.
  private func commit(_ elements: Int) {
    let needed = elements &* MemoryLayout<Element>.stride
    guard needed > committedBytes else { return }
    let target = (max(needed, 2 &* committedBytes) + Self.step - 1) / Self.step * Self.step
    if target > reservedBytes { move(toHold: target) }
    let start = UnsafeMutableRawPointer(base) + committedBytes
    guard mprotect(start, target &- committedBytes, PROT_READ | PROT_WRITE) == 0 else {
      ledgerOutOfMemory(ledger, "could not have \(target) bytes (errno \(errno))")
    }
    committedBytes = target
  }

  /// Moves the values to a range that can hold `bytes`.
  private func move(toHold bytes: Int) {
    let (moved, reserved) = Self.reserve(
      atLeast: bytes, hoping: max(bytes, min(2 &* reservedBytes, Self.addressSpaceLimit / 8)),
      for: ledger)
    if committedBytes > 0 {
      guard mprotect(moved, committedBytes, PROT_READ | PROT_WRITE) == 0 else {
        ledgerOutOfMemory(ledger, "could not move to a larger range (errno \(errno))")
      }
      UnsafeMutableRawPointer(moved).copyMemory(from: base, byteCount: committedBytes)
    }
    munmap(base, reservedBytes)
    unreservedAddressSpace.add(reservedBytes &- reserved, ordering: .relaxed)
    base = moved
    reservedBytes = reserved
    // (The copy wrote every committed page.)
    populatedBytes = committedBytes
  }
}

/// What `MappedArray`s may reserve together, less what they hold: each
/// asks for at most a 64th of it, so that a process's thousands of pools
/// (many what-if sides' partitions) fit half a 47-bit address space.
private let unreservedAddressSpace = Atomic<Int>(1 << 46)

/// The ledgers whose pools are `MappedArray`s, as an out-of-memory exit names them.
enum LedgerName: String, Sendable {
  case throttle = "rule 8's throttle ledger"
  case notifications = "the notification ledger (contract v3)"
}

/// Ends the run when a ledger cannot grow (the system refused it memory or
/// address space, or a pool reached its limit): the run's partial files and
/// lock are removed, as a signal would remove them, and the process exits
/// with `ExitStatus.outOfMemory` — not a crash.
func ledgerOutOfMemory(_ ledger: LedgerName, _ detail: String) -> Never {
  CleanupOnSignal.runAndExit(
    status: ExitStatus.outOfMemory.rawValue,
    saying: "fanout: out of memory: \(ledger.rawValue) \(detail); "
      + "the run's partial files and lock were removed")
}
