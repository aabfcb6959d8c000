import CPrefetch
import Dispatch
import FanoutModel

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// Byte strings stored end to end, addressed by dense `Int32` ids.
///
/// Used for ids and for pre-escaped JSON fragments, so that output is a byte
/// copy. `offsets` has one more element than there are strings.
public struct BytePool: Sendable {
  public private(set) var bytes: Column<UInt8>
  public private(set) var offsets: Column<Int>

  public init() { self.init(built: [], offsets: [0]) }

  /// A pool over `bytes` and `offsets` known to walk them in order (a
  /// builder's): nothing checked, no empty columns made only to be replaced.
  fileprivate init(built bytes: Column<UInt8>, offsets: Column<Int>) {
    self.bytes = bytes
    self.offsets = offsets
  }

  /// A pool over stored bytes and offsets (a compiled index's), or nil
  /// when the offsets do not walk the bytes from 0 to the end in order.
  package init?(bytes: Column<UInt8>, offsets: Column<Int>) {
    guard offsets.first == 0, offsets.last == bytes.count else { return nil }
    let inOrder = offsets.withUnsafeBufferPointer { o in
      var previous = 0
      for offset in o {
        if offset < previous { return false }
        previous = offset
      }
      return true
    }
    guard inOrder else { return nil }
    self.bytes = bytes
    self.offsets = offsets
  }

  public var count: Int { offsets.count - 1 }

  public mutating func append<S: Sequence>(_ s: S) where S.Element == UInt8 {
    let s = Array(s)
    s.withUnsafeBytes { append($0) }
  }

  /// Appends raw bytes (the loader's path: no generic sequence walk).
  public mutating func append(_ s: UnsafeRawBufferPointer) {
    bytes.append(contentsOf: s)
    offsets.append(bytes.count)
  }

  /// Appends every string of `other`, in order.
  public mutating func append(contentsOf other: BytePool) {
    let start = bytes.count
    other.bytes.withUnsafeBufferPointer { bytes.append(contentsOf: $0) }
    offsets.reserveCapacity(offsets.count + other.count)
    other.offsets.withUnsafeBufferPointer { more in
      for end in more.dropFirst() { offsets.append(start + end) }
    }
  }

  /// Makes room for `strings` more strings of `bytes` bytes in all: a pool
  /// whose size is known ahead is allocated, and its pages touched, once
  /// (each doubling of a large array faults in and fills fresh pages).
  public mutating func reserveCapacity(strings: Int, bytes: Int) {
    self.bytes.reserveCapacity(self.bytes.count + bytes)
    offsets.reserveCapacity(offsets.count + strings)
  }

  /// Removes every string, keeping the storage.
  public mutating func removeAll() {
    bytes.removeAll()
    offsets.removeAll()
    offsets.append(0)
  }

  /// Whether string `i` is `key`, byte for byte. (Inlinable: the loader
  /// asks once per member row whether it names the channel of the row before.)
  @inlinable
  public func equals(_ i: Int, _ key: UnsafeRawBufferPointer) -> Bool {
    let start = offsets[i]
    guard offsets[i + 1] - start == key.count else { return false }
    return key.isEmpty
      || sameBytes(UnsafeRawPointer(bytes.buffer.baseAddress! + start), key.baseAddress!, key.count)
  }

  /// Whether string `i` sorts before `key` in byte order.
  public func precedes(_ i: Int, _ key: UnsafeRawBufferPointer) -> Bool {
    let start = offsets[i]
    let count = offsets[i + 1] - start
    let common = min(count, key.count)
    let order =
      common == 0 ? 0 : memcmp(bytes.buffer.baseAddress! + start, key.baseAddress!, common)
    return order < 0 || (order == 0 && count < key.count)
  }

  /// Appends `s` as a JSON string literal (see `JSONText.quoted`).
  public mutating func appendQuoted(_ s: UnsafeRawBufferPointer) {
    JSONText.appendQuoted(s, to: &bytes)
    offsets.append(bytes.count)
  }

  /// String `i`'s bytes.
  public subscript(i: Int) -> Slice<Column<UInt8>> { bytes[offsets[i]..<offsets[i + 1]] }

  /// String `i`'s bytes, valid inside `body` only.
  public func withBytes<R>(_ i: Int, _ body: (UnsafeRawBufferPointer) -> R) -> R {
    bytes.withUnsafeBytes {
      body(UnsafeRawBufferPointer(rebasing: $0[offsets[i]..<offsets[i + 1]]))
    }
  }

  public func string(_ i: Int) -> String { String(decoding: self[i], as: UTF8.self) }

  /// The pool as raw bytes and offsets, for loops that copy many strings
  /// out: reading one touches no reference count. Valid while the pool's
  /// storage lives (the caller keeps the pool, or what holds it, alive).
  public struct View: @unchecked Sendable {
    public let bytes: UnsafeBufferPointer<UInt8>
    public let offsets: UnsafeBufferPointer<Int>

    public init(bytes: UnsafeBufferPointer<UInt8>, offsets: UnsafeBufferPointer<Int>) {
      self.bytes = bytes
      self.offsets = offsets
    }

    /// String `i`'s bytes.
    @inlinable @inline(__always)
    public subscript(i: Int) -> UnsafeBufferPointer<UInt8> {
      UnsafeBufferPointer(rebasing: bytes[offsets[i]..<offsets[i &+ 1]])
    }

    /// Asks for string `i`'s offsets ahead of reading it, then (once they
    /// are in) for its bytes: a loop over strings of scattered rows
    /// otherwise waits for two misses per string.
    @inlinable @inline(__always)
    public func prefetchOffsets(_ i: Int) {
      if let base = offsets.baseAddress { cprefetch_read(base + i) }
    }

    @inlinable @inline(__always)
    public func prefetchBytes(_ i: Int) {
      if let base = bytes.baseAddress { cprefetch_read(base + offsets[i]) }
    }
  }

  /// See `View`.
  public var view: View { View(bytes: bytes.buffer, offsets: offsets.buffer) }

  /// Whether both hold the same strings.
  public func sameStrings(as other: BytePool) -> Bool {
    offsets.sameBytes(as: other.offsets) && bytes.sameBytes(as: other.bytes)
  }
}

extension BytePool {
  /// Gathers strings, several per traffic line, and hands them over as a
  /// pool without copying them: an append checks once that the storage is
  /// this builder's alone, and copies a short string as two words.
  public struct Builder {
    /// The strings' bytes and where each ends, in one object (one check
    /// per append that no copy of the builder shares them).
    @usableFromInline final class Storage {
      @exclusivity(unchecked) @usableFromInline var bytes: ColumnStorage<UInt8>
      @exclusivity(unchecked) @usableFromInline var offsets: ColumnStorage<Int>

      @usableFromInline init(bytes: ColumnStorage<UInt8>, offsets: ColumnStorage<Int>) {
        self.bytes = bytes
        self.offsets = offsets
      }

      @usableFromInline convenience init() {
        self.init(bytes: ColumnStorage(capacity: 1), offsets: ColumnStorage(capacity: 1))
        offsets.append(0)
      }

      /// A copy with room for `bytes` more bytes and `strings` more strings.
      @usableFromInline func copy(moreBytes: Int = 0, moreStrings: Int = 0) -> Storage {
        Storage(
          bytes: ColumnStorage(copying: bytes.values, capacity: bytes.count + moreBytes),
          offsets: ColumnStorage(copying: offsets.values, capacity: offsets.count + moreStrings))
      }

      /// Marks the end of the string whose bytes were just appended.
      @inlinable @inline(__always)
      func endString() {
        offsets.reserve(offsets.count &+ 1)
        offsets.append(bytes.count)
      }

      /// No strings, shared by every builder that has none yet: the first
      /// change makes a builder its own (an empty builder allocates
      /// nothing, and one that is reserved allocates once). Never changed:
      /// a builder changes only storage it alone holds.
      @usableFromInline nonisolated(unsafe) static let empty = Storage()
    }
    @usableFromInline var storage = Storage.empty

    public init() {}

    public var count: Int { storage.offsets.count - 1 }

    /// The bytes gathered so far, valid while the builder is unchanged.
    public var bytes: UnsafeBufferPointer<UInt8> { storage.bytes.values }
    /// Where each string starts (and the last ends), as `BytePool.offsets`.
    public var offsets: UnsafeBufferPointer<Int> { storage.offsets.values }

    /// The storage, this builder's alone.
    @inlinable @inline(__always)
    mutating func own() -> Storage {
      if !isKnownUniquelyReferenced(&storage) { storage = storage.copy() }
      return storage
    }

    /// Room for `strings` more strings of `bytes` bytes in all.
    public mutating func reserveCapacity(strings: Int, bytes: Int) {
      guard isKnownUniquelyReferenced(&storage) else {
        storage = storage.copy(moreBytes: bytes, moreStrings: strings)
        return
      }
      storage.bytes.reserve(storage.bytes.count + bytes)
      storage.offsets.reserve(storage.offsets.count + strings)
    }

    @inlinable
    public mutating func append(_ s: UnsafeRawBufferPointer) {
      let own = own()
      let end = own.bytes.count &+ s.count
      own.bytes.reserve(end)
      if let from = s.baseAddress {
        copyBytes(from, to: UnsafeMutableRawPointer(own.bytes.base + own.bytes.count), s.count)
      }
      own.bytes.count = end
      own.endString()
    }

    /// Appends `s`, which needs no escape (no control character, quote or
    /// backslash: a plain traffic line's string), as a JSON string literal.
    @inlinable
    public mutating func appendQuotedPlain(_ s: UnsafeRawBufferPointer) {
      let own = own()
      let start = own.bytes.count
      let end = start &+ s.count &+ 2
      own.bytes.reserve(end)
      let out = UnsafeMutableRawPointer(own.bytes.base + start)
      out.storeBytes(of: UInt8(ascii: "\""), as: UInt8.self)
      if let from = s.baseAddress { copyBytes(from, to: out + 1, s.count) }
      (out + 1 + s.count).storeBytes(of: UInt8(ascii: "\""), as: UInt8.self)
      own.bytes.count = end
      own.endString()
    }

    /// Appends `s` as a JSON string literal (see `JSONText.quoted`).
    public mutating func appendQuoted(_ s: UnsafeRawBufferPointer) {
      var sink = BytesSink(storage: own())
      JSONText.appendQuoted(s, to: &sink)
      sink.storage.endString()
    }

    /// Appends to a builder's bytes, the string's end not yet marked.
    private struct BytesSink: JSONByteSink {
      let storage: Storage

      mutating func append(_ byte: UInt8) {
        storage.bytes.reserve(storage.bytes.count &+ 1)
        storage.bytes.append(byte)
      }

      mutating func append(contentsOf bytes: UnsafeRawBufferPointer) {
        storage.bytes.reserve(storage.bytes.count &+ bytes.count)
        storage.bytes.append(bytes: bytes)
      }
    }

    /// Removes the strings from the `count`th on.
    public mutating func removeLast(from count: Int) {
      let own = own()
      own.bytes.count = own.offsets.values[count]
      own.offsets.count = count + 1
    }

    /// String `i`'s bytes, valid inside `body` only.
    @inlinable
    public func withBytes<R>(_ i: Int, _ body: (UnsafeRawBufferPointer) -> R) -> R {
      let offsets = storage.offsets.values
      return body(
        UnsafeRawBufferPointer(
          rebasing: UnsafeRawBufferPointer(storage.bytes.values)[offsets[i]..<offsets[i + 1]]))
    }

    /// Removes every string, keeping the storage.
    public mutating func removeAll() {
      let own = own()
      own.bytes.count = 0
      own.offsets.count = 1
    }

    /// String `i`, for messages.
    public func string(_ i: Int) -> String { withBytes(i) { String(decoding: $0, as: UTF8.self) } }

    /// The strings appended since the last `take`, as a pool (their
    /// storage handed over, not copied); the builder starts over.
    public mutating func take() -> BytePool {
      let own = own()
      storage = Storage.empty
      return BytePool(built: Column(owning: own.bytes), offsets: Column(owning: own.offsets))
    }
  }
}

/// Copies `count` bytes from `from` to `to` (not overlapping): up to 16
/// as two words that may overlap, inline, where a call to `memcpy` would
/// cost more than the copy (ids are a few bytes long).
@inlinable @inline(__always)
func copyBytes(_ from: UnsafeRawPointer, to: UnsafeMutableRawPointer, _ count: Int) {
  switch count {
  case 8...16:
    let head = from.loadUnaligned(as: UInt64.self)
    let tail = from.loadUnaligned(fromByteOffset: count &- 8, as: UInt64.self)
    to.storeBytes(of: head, as: UInt64.self)
    to.storeBytes(of: tail, toByteOffset: count &- 8, as: UInt64.self)
  case 4..<8:
    let head = from.loadUnaligned(as: UInt32.self)
    let tail = from.loadUnaligned(fromByteOffset: count &- 4, as: UInt32.self)
    to.storeBytes(of: head, as: UInt32.self)
    to.storeBytes(of: tail, toByteOffset: count &- 4, as: UInt32.self)
  case 0..<4:
    for i in 0..<count {
      let byte = from.load(fromByteOffset: i, as: UInt8.self)
      to.storeBytes(of: byte, toByteOffset: i, as: UInt8.self)
    }
  default:
    to.copyMemory(from: from, byteCount: count)
  }
}

/// Whether `count` bytes at `a` and `b` are equal. Ids are mostly a few
/// bytes long: up to 16 are compared as two (overlapping) 8-byte words,
/// inline, where a call to `memcmp` would cost more than the comparison.
@inlinable @inline(__always)
package func sameBytes(_ a: UnsafeRawPointer, _ b: UnsafeRawPointer, _ count: Int) -> Bool {
  switch count {
  case 8...16:
    return a.loadUnaligned(as: UInt64.self) == b.loadUnaligned(as: UInt64.self)
      && a.loadUnaligned(fromByteOffset: count - 8, as: UInt64.self)
        == b.loadUnaligned(fromByteOffset: count - 8, as: UInt64.self)
  case 4..<8:
    return a.loadUnaligned(as: UInt32.self) == b.loadUnaligned(as: UInt32.self)
      && a.loadUnaligned(fromByteOffset: count - 4, as: UInt32.self)
        == b.loadUnaligned(fromByteOffset: count - 4, as: UInt32.self)
  case 0..<4:
    for i in 0..<count
    where a.load(fromByteOffset: i, as: UInt8.self) != b.load(fromByteOffset: i, as: UInt8.self) {
      return false
    }
    return true
  default:
    return memcmp(a, b, count) == 0
  }
}

/// An interned set of strings: dense ids in insertion order, and a lookup
/// from raw bytes to id that hashes the bytes without making a `String`.
public struct StringTable: Sendable {
  public private(set) var pool = BytePool()
  /// Open addressing: `hash tag << 32 | id`, or `empty`. The tag spares most
  /// probes a visit to the pool (a cache miss each at millions of ids).
  private var slots = Column([UInt64](repeating: StringTable.empty, count: 16))
  private static let empty = UInt64.max
  /// The length of every key, when they all have one (ids like `u0046394`,
  /// or UUIDs): key `id` then starts at `id * length`, and a lookup reads no
  /// offset — one dependent cache miss fewer.
  private var sharedLength: Int?

  public init() {}

  /// The hash table as stored in a compiled index.
  package var rawSlots: Column<UInt64> { slots }

  /// A table over `pool` with its stored hash table, or nil when the table
  /// cannot be `pool`'s: a size that is no power of two, too full, or
  /// holding another number of ids or an id out of range. (Which id sits
  /// where is the file checksum's to vouch for.)
  package init?(pool: BytePool, rawSlots: Column<UInt64>) {
    guard rawSlots.count >= 16, rawSlots.count & (rawSlots.count - 1) == 0,
      pool.count * 2 <= rawSlots.count
    else { return nil }
    // The used slots counted, each id checked: in two halves at once for
    // a large table (a cached load of 1M users reads 16M channel slots).
    let halves = rawSlots.count >= 1 << 20 ? 2 : 1
    let counts = UnsafeMutableBufferPointer<Int>.allocate(capacity: halves)
    defer { counts.deallocate() }
    // (Each iteration writes its own count only; -1: an id out of range.)
    nonisolated(unsafe) let slotCounts = counts
    nonisolated(unsafe) let slots = rawSlots.buffer  // read only
    let limit = UInt32(clamping: pool.count)
    DispatchQueue.concurrentPerform(iterations: halves) { half in
      let part = slots.count / halves
      // No branch and no early exit, so that the loop is vectorized: a
      // pass over 128 MB at 1M users.
      var used = 0
      var outOfRange: UInt32 = 0
      for slot in slots[(half * part)..<(half == halves - 1 ? slots.count : (half + 1) * part)] {
        let isUsed: UInt32 = slot != Self.empty ? 1 : 0
        used &+= Int(isUsed)
        outOfRange |= isUsed & (UInt32(truncatingIfNeeded: slot) >= limit ? 1 : 0)
      }
      slotCounts[half] = outOfRange != 0 ? -1 : used
    }
    guard !counts.contains(-1), counts.reduce(0, +) == pool.count else { return nil }
    self.pool = pool
    self.slots = rawSlots
    sharedLength = Self.sharedLength(of: pool)
  }

  /// A table over `pool`'s strings, ids in pool order; the strings must be distinct.
  public init(indexing pool: BytePool) {
    self.init(capacity: pool.count)
    self.pool = pool
    sharedLength = Self.sharedLength(of: pool)
    // In batches: each batch's first slots are asked for before any is
    // written, so that their cache misses overlap.
    let batch = 256
    var hashes = [UInt64](repeating: 0, count: batch)
    let mask = slots.count - 1
    pool.bytes.withUnsafeBytes { raw in
      for first in stride(from: 0, to: pool.count, by: batch) {
        let ids = first..<min(first + batch, pool.count)
        slots.withUnsafeBufferPointer { slots in
          for id in ids {
            let hash = Self.hash(
              UnsafeRawBufferPointer(rebasing: raw[pool.offsets[id]..<pool.offsets[id + 1]]))
            hashes[id - first] = hash
            cprefetch_read(slots.baseAddress! + Int(truncatingIfNeeded: hash) & mask)
          }
        }
        for id in ids { place(Int32(id), hash: hashes[id - first]) }
      }
    }
  }

  /// An empty table with room for `capacity` strings without rehashing.
  public init(capacity: Int) {
    var size = 16
    while size < capacity * 2 + 2 { size *= 2 }
    slots = Column([UInt64](repeating: Self.empty, count: size))
  }

  public var count: Int { pool.count }
  public subscript(i: Int) -> String { pool.string(i) }

  /// Adds `s` and returns its id, or returns nil if it is already present.
  public mutating func insert(_ s: String) -> Int32? {
    var s = s
    return s.withUTF8 { insert(UnsafeRawBufferPointer($0)) }
  }

  public mutating func insert(_ key: UnsafeRawBufferPointer) -> Int32? {
    if find(key) != nil { return nil }
    return append(key)
  }

  /// Adds `key` without checking that it is new: for callers that know
  /// (keys arriving sorted and checked against their predecessor).
  @discardableResult
  public mutating func append(_ key: UnsafeRawBufferPointer) -> Int32 {
    if (count + 1) * 2 > slots.count { grow() }
    sharedLength = count == 0 || sharedLength == key.count ? key.count : nil
    let id = Int32(count)
    pool.append(key)
    place(id, hash: Self.hash(key))
    return id
  }

  public func find(_ s: String) -> Int32? {
    var s = s
    return s.withUTF8 { find(UnsafeRawBufferPointer($0)) }
  }

  /// The id of `key`, if present.
  ///
  /// - Complexity: O(key length) expected; does not allocate.
  public func find(_ key: UnsafeRawBufferPointer) -> Int32? {
    let mask = slots.count - 1
    let hash = Self.hash(key)
    let tag = hash >> 32
    var i = Int(truncatingIfNeeded: hash) & mask
    return pool.bytes.withUnsafeBufferPointer { bytes in
      pool.offsets.withUnsafeBufferPointer { offsets in
        slots.withUnsafeBufferPointer { slots in
          while true {
            let slot = slots[i]
            if slot == Self.empty { return nil }
            let id = Int32(truncatingIfNeeded: slot)
            guard slot >> 32 == tag else {
              i = (i + 1) & mask
              continue
            }
            let lo = sharedLength.map { Int(id) &* $0 } ?? offsets[Int(id)]
            if (sharedLength ?? offsets[Int(id) + 1] - lo) == key.count
              && (key.isEmpty || sameBytes(bytes.baseAddress! + lo, key.baseAddress!, key.count))
            {
              return id
            }
            i = (i + 1) & mask
          }
        }
      }
    }
  }

  /// Looks up every key of `batch` (in order), writing the ids (-1 when
  /// absent) to `ids`, the cache misses of several keys overlapping instead
  /// of following one another.
  public func find(batch: BytePool, into ids: inout [Int32]) {
    batch.bytes.withUnsafeBytes { keys in
      batch.offsets.withUnsafeBufferPointer { find(batch: keys, offsets: $0, into: &ids) }
    }
  }

  /// `find(batch:into:)` for strings still being gathered (`KeyBatch`).
  public func find(batch: BytePool.Builder, into ids: inout [Int32]) {
    find(batch: UnsafeRawBufferPointer(batch.bytes), offsets: batch.offsets, into: &ids)
  }

  /// Key `k` spans `keys[offsets[k]..<offsets[k + 1]]`.
  ///
  /// A pipeline over the keys, each step `lookahead` keys behind the one
  /// before: ask for key k's slot; read it and ask for where its stored key
  /// starts; ask for the stored key's bytes; compare. About `lookahead`
  /// lookups are in flight at each step, and what a step reads was asked
  /// for shortly before. At 1M (6.6M channels, 1M users) a name costs
  /// 47–61 ns so; asking for a whole batch's slots first, then reading
  /// them, and so on phase by phase, it cost 70–79 ns (lookaheads of 16,
  /// 24 and 32 measure alike; 4 and 8 slower).
  private func find(
    batch keys: UnsafeRawBufferPointer, offsets: UnsafeBufferPointer<Int>, into ids: inout [Int32]
  ) {
    let n = offsets.count - 1
    ids.removeAll(keepingCapacity: true)
    guard n > 0 else { return }
    ids.reserveCapacity(n)
    let lookahead = 16
    let mask = slots.count - 1
    let sharedLength = sharedLength
    // Per key: its hash, then its candidate slot, then where the stored key starts.
    var hashes = [UInt64](repeating: 0, count: n)
    var candidates = [UInt64](repeating: Self.empty, count: n)
    var starts = [Int](repeating: 0, count: n)
    func key(_ k: Int) -> UnsafeRawBufferPointer {
      UnsafeRawBufferPointer(rebasing: keys[offsets[k]..<offsets[k + 1]])
    }
    for k in 0..<n { hashes[k] = Self.hash(key(k)) }
    func tagMatches(_ k: Int) -> Bool {
      candidates[k] != Self.empty && candidates[k] >> 32 == hashes[k] >> 32
    }
    slots.withUnsafeBufferPointer { slots in
      pool.offsets.withUnsafeBufferPointer { poolOffsets in
        pool.bytes.withUnsafeBufferPointer { bytes in
          for step in 0..<(n + 3 * lookahead) {
            if step < n {
              cprefetch_read(slots.baseAddress! + Int(truncatingIfNeeded: hashes[step]) & mask)
            }
            // The first slot with the key's tag, or an empty one: probing on
            // mostly stays in the cache line already loaded.
            let probed = step - lookahead
            if probed >= 0 && probed < n {
              let tag = hashes[probed] >> 32
              var i = Int(truncatingIfNeeded: hashes[probed]) & mask
              while slots[i] != Self.empty && slots[i] >> 32 != tag { i = (i + 1) & mask }
              candidates[probed] = slots[i]
              if tagMatches(probed) {
                let id = Int(UInt32(truncatingIfNeeded: slots[i]))
                if let length = sharedLength {
                  starts[probed] = id &* length
                } else {
                  cprefetch_read(poolOffsets.baseAddress! + id)
                }
              }
            }
            let located = step - 2 * lookahead
            if located >= 0 && located < n && tagMatches(located) {
              if sharedLength == nil {
                starts[located] = poolOffsets[Int(UInt32(truncatingIfNeeded: candidates[located]))]
              }
              cprefetch_read(bytes.baseAddress! + starts[located])
            }
            let k = step - 3 * lookahead
            guard k >= 0 && k < n else { continue }
            let key = key(k)
            if tagMatches(k) {
              let id = Int(UInt32(truncatingIfNeeded: candidates[k]))
              if (sharedLength ?? poolOffsets[id + 1] - starts[k]) == key.count
                && (key.isEmpty
                  || sameBytes(bytes.baseAddress! + starts[k], key.baseAddress!, key.count))
              {
                ids.append(Int32(id))
                continue
              }
            }
            // Tags alike, keys not: probe on.
            ids.append(candidates[k] == Self.empty ? -1 : (find(key) ?? -1))
          }
        }
      }
    }
  }

  /// The length all of `pool`'s strings have, if they have one.
  private static func sharedLength(of pool: BytePool) -> Int? {
    pool.offsets.withUnsafeBufferPointer { offsets in
      guard offsets.count > 1 else { return nil }
      let length = offsets[1] &- offsets[0]
      for i in 1..<offsets.count where offsets[i] &- offsets[i &- 1] != length { return nil }
      return length
    }
  }

  private mutating func place(_ id: Int32, hash: UInt64) {
    slots.withUnsafeMutableBufferPointer { slots in
      let mask = slots.count - 1
      var i = Int(truncatingIfNeeded: hash) & mask
      while slots[i] != Self.empty { i = (i + 1) & mask }
      slots[i] = (hash >> 32) << 32 | UInt64(UInt32(id))
    }
  }

  private mutating func grow() {
    slots = Column([UInt64](repeating: Self.empty, count: slots.count * 2))
    for id in 0..<count {
      let h = pool.bytes.withUnsafeBytes { raw in
        Self.hash(UnsafeRawBufferPointer(rebasing: raw[pool.offsets[id]..<pool.offsets[id + 1]]))
      }
      place(Int32(id), hash: h)
    }
  }

  /// FNV-1a with a 64-bit finalizer (ids like `u0000001` differ only in
  /// their last bytes; without mixing they cluster under linear probing).
  /// Fixed, so lookups cost the same in every process.
  static func hash(_ key: UnsafeRawBufferPointer) -> UInt64 {
    var h: UInt64 = 0xcbf2_9ce4_8422_2325
    for i in 0..<key.count { h = (h ^ UInt64(key[i])) &* 0x100_0000_01b3 }
    h ^= h >> 33
    h &*= 0xff51_afd7_ed55_8ccd
    h ^= h >> 33
    h &*= 0xc4ce_b9fe_1a85_ec53
    return h ^ (h >> 33)
  }
}
