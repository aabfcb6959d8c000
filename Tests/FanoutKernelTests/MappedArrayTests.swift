import FanoutModel
import Glibc
import Testing

@testable import FanoutKernel

@Suite("MappedArray: the ledgers' pools")
struct MappedArrayTests {
  @Test("growing past many commit steps keeps every value in place, at the same address")
  func growth() {
    let array = MappedArray<Int64>(.notifications)
    let base = array.base
    // 3M values: 24 MB, a dozen 2 MB commit steps.
    for i in 0..<3_000_000 { array.append(Int64(i) &* 7) }
    #expect(array.base == base)
    #expect(array.count == 3_000_000)
    var wrong = 0
    for i in 0..<array.count where array[i] != Int64(i) &* 7 { wrong += 1 }
    #expect(wrong == 0)
    array[12345] += 1
    #expect(array[12345] == 12345 * 7 + 1)
  }

  @Test("an array that outgrows a small address range moves, every value with it")
  func moves() {
    // A range of 4 MB: 24 MB of values move three times.
    let array = MappedArray<Int64>(.notifications, reservation: 4 << 20)
    for i in 0..<3_000_000 { array.append(Int64(i) &* 3) }
    #expect(array.count == 3_000_000)
    var wrong = 0
    for i in 0..<array.count where array[i] != Int64(i) &* 3 { wrong += 1 }
    #expect(wrong == 0)
  }

  @Test("zeroed elements read as zero, repeated ones as their value, after what came before")
  func zeroedAndRepeated() {
    let array = MappedArray<Int32>(.notifications)
    array.append(repeating: -1, count: 1000)
    array.appendZeroed(count: 5_000_000)
    array.append(9)
    #expect(array.count == 5_001_001)
    #expect((0..<1000).allSatisfy { array[$0] == -1 })
    #expect((1000..<5_001_000).allSatisfy { array[$0] == 0 })
    #expect(array[5_001_000] == 9)
  }

  @Test("populated memory keeps the values written before, reads zero elsewhere, and takes more")
  func populated() {
    let array = MappedArray<Int32>(.notifications)
    array.appendZeroed(count: 3_000_000)
    array[7] = 42
    array[2_999_999] = -5
    array.populate(threads: 2)
    #expect(array[7] == 42)
    #expect(array[2_999_999] == -5)
    var nonzero = 0
    for i in 0..<array.count where array[i] != 0 { nonzero += 1 }
    #expect(nonzero == 2)
    array.append(1)
    #expect(array[3_000_000] == 1)
  }

  @Test("an array barely used holds a few pages, not a 2 MB step (a partition of many threads')")
  func smallArraysHoldFewPages() {
    let array = MappedArray<Int64>(.throttle)
    for i in 0..<10 { array.append(Int64(i)) }
    #expect(residentPages(array.base, bytes: 2 << 20) <= 16)
    // Growing, it takes pages as it doubles: 100,000 values (800 KB) hold at most twice that.
    for i in 10..<100_000 { array.append(Int64(i)) }
    #expect(residentPages(array.base, bytes: 2 << 20) <= 2 * 800_000 / 4096 + 16)
    #expect(array[99_999] == 99_999)
  }

  @Test("nine thousand pools at once each get a range: they ask for half the address space at most")
  func manyPools() {
    // 9,000 × 16 GB would be more than the 128 TB a process can map: the
    // last pools could not reserve even one 2 MB step (exit 71).
    let pools = (0..<9_000).map { _ in MappedArray<Int64>(.notifications) }
    for pool in pools { pool.appendZeroed(count: 1) }
    #expect(pools.allSatisfy { $0.count == 1 && $0[0] == 0 })
  }

  /// How many of the pages of `bytes` from `base` are resident (`mincore`).
  private func residentPages(_ base: UnsafeMutableRawPointer, bytes: Int) -> Int {
    var pages = [UInt8](repeating: 0, count: bytes / 4096)
    guard mincore(base, bytes, &pages) == 0 else { return Int.max }
    return pages.reduce(0) { $0 + Int($1 & 1) }
  }

  @Test("a pool the system refuses memory ends the run with exit 71, its cleanups run, no crash")
  func outOfMemory() async {
    let result = await #expect(
      processExitsWith: .exitCode(71), observing: [\.standardErrorContent]
    ) {
      // The address space limited to what the process has now and 256 MB:
      // a pool growing to 1 GB must move to a range the system refuses.
      let statm = (try? String(contentsOfFile: "/proc/self/statm", encoding: .utf8)) ?? ""
      let pages = Int(statm.split(separator: " ").first ?? "") ?? 0
      var limit = rlimit()
      limit.rlim_cur = rlim_t(pages * 4096 + (256 << 20))
      limit.rlim_max = rlim_t.max
      setrlimit(__rlimit_resource_t(RLIMIT_AS.rawValue), &limit)
      _ = CleanupOnSignal.register {
        let line = Array("a cleanup ran\n".utf8)
        _ = write(STDERR_FILENO, line, line.count)
      }
      let array = MappedArray<Int64>(.notifications, reservation: 4 << 20)
      for i in 0..<(128 << 20) { array.append(Int64(i)) }
    }
    let said = String(decoding: result?.standardErrorContent ?? [], as: UTF8.self)
    #expect(said.contains("a cleanup ran"))
    #expect(said.contains("fanout: out of memory: the notification ledger"))
  }

  @Test("a notification ledger's user record and group take half a cache line each")
  func recordSizes() {
    // Never across two cache lines: a pair's walk waits on each line it touches.
    #expect(MemoryLayout<NotificationState.User>.stride == 32)
    #expect(MemoryLayout<NotificationState.Group>.stride == 32)
  }
}

@Suite("BlockPool: the notification ledger's lists")
struct BlockPoolTests {
  @Test("lists growing past the large size keep every entry, and released blocks are reused")
  func largeBlocks() {
    var pool = BlockPool(width: 3)
    // Three lists grown side by side to 3,000 entries (blocks of 1 to
    // 4,096 entries: the pool's array below `largeSize`, allocations of
    // their own from it), each checked against a plain array.
    var blocks = [BlockPool.none, BlockPool.none, BlockPool.none]
    var sizes: [UInt8] = [0, 0, 0]
    var model: [[Int64]] = [[], [], []]
    for n in 0..<3_000 {
      for l in 0..<3 {
        let count = model[l].count
        if blocks[l] == BlockPool.none {
          sizes[l] = 1
          blocks[l] = pool.allocate(size: 1)
        } else if count == BlockPool.capacity(sizes[l]) {
          blocks[l] = pool.grow(blocks[l], size: sizes[l], count: count)
          sizes[l] += 1
        }
        let value = Int64(n * 10 + l)
        for field in 0..<3 { pool[blocks[l], count, field] = value &* 3 &+ Int64(field) }
        model[l].append(value)
      }
    }
    #expect(sizes.allSatisfy { $0 > BlockPool.largeSize })
    for l in 0..<3 {
      let wrong = model[l].indices.filter { i in
        (0..<3).contains { pool[blocks[l], i, $0] != model[l][i] &* 3 &+ Int64($0) }
      }
      #expect(wrong.isEmpty, "list \(l): \(wrong.prefix(3))")
    }
    // Compacting in place, as a read does: every other entry kept.
    for i in stride(from: 0, to: 3_000, by: 2) { pool.copy(blocks[0], i, to: i / 2) }
    #expect(pool[blocks[0], 1_499, 0] == model[0][2_998] &* 3)
    // A released large block's number is given again; a small one's too.
    let released = blocks[1]
    pool.release(released, size: sizes[1])
    #expect(pool.allocate(size: BlockPool.largeSize) == released)
    let small = pool.allocate(size: 2)
    pool.release(small, size: 2)
    #expect(pool.allocate(size: 2) == small)
  }
}
