import CPrefetch

/// One notification partition's `mentions` and `calls` groups, by
/// membership slot and type: open addressing, linear probing, at most half
/// full. A membership's `messages` group is in the ledger's slot map, four
/// bytes per membership; the other two types are rarer (about one
/// delivered pair in seven in `fanout gen --v3`'s traffic), and a slot map
/// for them took eight bytes more per membership, given pages up front
/// whether used or not (153 MB at 1M users).
struct OtherGroups {
  /// A key (slot × 2 + type − 1) and its group's place + 1; 0: free.
  struct Entry {
    var key: UInt32 = 0
    var place: Int32 = 0
  }

  private var table = Self.zeroed(1024)
  private var used = 0

  /// Slots are below 2^31, as everywhere in the ledgers (`DeliveredPairs`):
  /// the key fits 32 bits.
  @inline(__always)
  private static func key(slot: Int, type: UInt8) -> UInt32 {
    UInt32(truncatingIfNeeded: slot) &<< 1 | UInt32(type &- 1)
  }

  /// Where `key`'s probe starts (Fibonacci hashing: the members of one
  /// channel, whose slots are consecutive, spread over the table).
  @inline(__always)
  private func start(_ key: UInt32) -> Int {
    Int(truncatingIfNeeded: (UInt64(key) &* 0x9E37_79B9_7F4A_7C15) &>> 32) & (table.count &- 1)
  }

  @inline(__always)
  func prefetch(slot: Int, type: UInt8) {
    table.prefetch(start(Self.key(slot: slot, type: type)))
  }

  /// The group of membership `slot` and `type`, if made.
  @inline(__always)
  func find(slot: Int, type: UInt8) -> Int? {
    let key = Self.key(slot: slot, type: type)
    let mask = table.count &- 1
    var k = start(key)
    while true {
      let entry = table[k]
      if entry.place == 0 { return nil }
      if entry.key == key { return Int(entry.place) &- 1 }
      k = (k &+ 1) & mask
    }
  }

  /// Records `group` as membership `slot`'s group of `type` (not there yet).
  mutating func insert(slot: Int, type: UInt8, group: Int) {
    if 2 &* (used &+ 1) > table.count { grow() }
    let key = Self.key(slot: slot, type: type)
    place(Entry(key: key, place: Int32(truncatingIfNeeded: group &+ 1)))
    used &+= 1
  }

  @inline(__always)
  private func place(_ entry: Entry) {
    let mask = table.count &- 1
    var k = start(entry.key)
    while table[k].place != 0 { k = (k &+ 1) & mask }
    table[k] = entry
  }

  private mutating func grow() {
    let old = table
    table = Self.zeroed(old.count &* 2)
    for k in 0..<old.count where old[k].place != 0 { place(old[k]) }
  }

  /// A table of `count` free entries, written now: it is read at random
  /// before it is written, and a page read first would fault twice
  /// (`MappedArray.populate`).
  private static func zeroed(_ count: Int) -> MappedArray<Entry> {
    let table = MappedArray<Entry>(.notifications)
    table.append(repeating: Entry(), count: count)
    return table
  }
}
