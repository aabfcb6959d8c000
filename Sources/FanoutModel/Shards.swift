/// Recipient shards (docs/scale-out.md): a user's shard is
/// `pmod(XXH64(UTF-8 bytes of user_id, seed 42), N)` — Spark SQL's
/// `pmod(xxhash64(user_id), N)`, so a warehouse job can write shards itself.
public enum Shards {
  /// The seed of Spark's `xxhash64`.
  public static let seed: UInt64 = 42

  /// The shard (0..<count) of a user id's UTF-8 bytes.
  public static func shard(of userID: UnsafeRawBufferPointer, count: Int) -> Int {
    let signed = Int64(bitPattern: XXH64.hash(userID, seed: seed))
    let n = Int64(count)
    return Int(((signed % n) + n) % n)
  }

  public static func shard(of userID: String, count: Int) -> Int {
    var id = userID
    return id.withUTF8 { shard(of: UnsafeRawBufferPointer($0), count: count) }
  }
}

/// The `fanout_shard` settings value a shard snapshot carries: "K/N", shard
/// K (from 0) of N, and from `fanout snapshot split` "K/N/ID", where ID
/// names the split (a digest of the source's state and N: `fanout merge`
/// merges only shards of one split). Read only by `eval --mergeable`; any
/// other command ignores it, like every settings key the contract does not name.
public struct ShardLabel: Sendable, Equatable, CustomStringConvertible {
  public static let settingsKey = "fanout_shard"

  public let index: Int
  public let count: Int
  /// The split's id (16 lower-case hex digits), when a split wrote the label.
  public let split: String?

  public init(index: Int, count: Int, split: String? = nil) {
    self.index = index
    self.count = count
    self.split = split
  }

  /// Parses "K/N" (decimal, 0 <= K < N) or "K/N/ID" (ID in hex digits).
  public init?(_ text: String) {
    let parts = text.split(separator: "/", omittingEmptySubsequences: false)
    guard parts.count == 2 || parts.count == 3,
      parts.allSatisfy({ !$0.isEmpty && $0.allSatisfy(\.isASCII) }),
      let k = Int(parts[0]), let n = Int(parts[1]), k >= 0, n >= 1, k < n
    else { return nil }
    let split = parts.count == 3 ? String(parts[2]) : nil
    if let split, split.count > 32 || !split.allSatisfy(\.isHexDigit) { return nil }
    self.init(index: k, count: n, split: split)
  }

  /// "K/N", the shard's place (the id is not part of it).
  public var description: String { "\(index)/\(count)" }

  /// What `fanout_shard` holds: "K/N", or "K/N/ID".
  public var settingsValue: String { description + (split.map { "/" + $0 } ?? "") }

  /// 16 hex digits of `value`.
  public static func hex(_ value: UInt64) -> String {
    let digits = String(value, radix: 16)
    return String(repeating: "0", count: 16 - digits.count) + digits
  }
}

/// XXH64 (xxhash.com), the one-shot form: the shard hash, and the traffic
/// digest that lets `fanout merge` refuse shards run on other traffic.
public enum XXH64 {
  static let p1: UInt64 = 11_400_714_785_074_694_791
  static let p2: UInt64 = 14_029_467_366_897_019_727
  static let p3: UInt64 = 1_609_587_929_392_839_161
  static let p4: UInt64 = 9_650_029_242_287_828_579
  static let p5: UInt64 = 2_870_177_450_012_600_261

  @inline(__always) static func rotl(_ x: UInt64, _ r: UInt64) -> UInt64 {
    (x << r) | (x >> (64 - r))
  }

  @inline(__always) static func round(_ acc: UInt64, _ input: UInt64) -> UInt64 {
    rotl(acc &+ input &* p2, 31) &* p1
  }

  @inline(__always) static func merge(_ acc: UInt64, _ v: UInt64) -> UInt64 {
    (acc ^ round(0, v)) &* p1 &+ p4
  }

  public static func hash(_ bytes: UnsafeRawBufferPointer, seed: UInt64) -> UInt64 {
    let n = bytes.count
    var i = 0
    func word(_ at: Int) -> UInt64 {
      UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: at, as: UInt64.self))
    }
    var h: UInt64
    if n >= 32 {
      var v1 = seed &+ p1 &+ p2
      var v2 = seed &+ p2
      var v3 = seed
      var v4 = seed &- p1
      while i + 32 <= n {
        v1 = round(v1, word(i))
        v2 = round(v2, word(i + 8))
        v3 = round(v3, word(i + 16))
        v4 = round(v4, word(i + 24))
        i += 32
      }
      h = converge(v1, v2, v3, v4)
    } else {
      h = seed &+ p5
    }
    return finish(h &+ UInt64(n), tail: UnsafeRawBufferPointer(rebasing: bytes[i...]))
  }

  /// The four lanes made one, once every whole 32-byte stripe is in.
  @inline(__always)
  static func converge(_ v1: UInt64, _ v2: UInt64, _ v3: UInt64, _ v4: UInt64) -> UInt64 {
    var h = rotl(v1, 1) &+ rotl(v2, 7) &+ rotl(v3, 12) &+ rotl(v4, 18)
    h = merge(h, v1)
    h = merge(h, v2)
    h = merge(h, v3)
    return merge(h, v4)
  }

  /// The last steps: the bytes after the last 32-byte stripe (fewer than
  /// 32), then the avalanche.
  @inline(__always)
  static func finish(_ state: UInt64, tail bytes: UnsafeRawBufferPointer) -> UInt64 {
    var h = state
    let n = bytes.count
    var i = 0
    while i + 8 <= n {
      h ^= round(0, UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: i, as: UInt64.self)))
      h = rotl(h, 27) &* p1 &+ p4
      i += 8
    }
    if i + 4 <= n {
      h ^=
        UInt64(UInt32(littleEndian: bytes.loadUnaligned(fromByteOffset: i, as: UInt32.self))) &* p1
      h = rotl(h, 23) &* p2 &+ p3
      i += 4
    }
    while i < n {
      h ^= UInt64(bytes[i]) &* p5
      h = rotl(h, 11) &* p1
      i += 1
    }
    h ^= h >> 33
    h = h &* p2
    h ^= h >> 29
    h = h &* p3
    h ^= h >> 32
    return h
  }

  /// XXH64 of bytes given in pieces: the same value as `hash` of them all
  /// at once, whatever the pieces (a file's digest while it is written).
  public struct Stream: Sendable {
    private var v1: UInt64, v2: UInt64, v3: UInt64, v4: UInt64
    private let seed: UInt64
    private var total = 0
    /// Bytes not yet in a whole 32-byte stripe.
    private var pending: [UInt8] = []

    public init(seed: UInt64 = 0) {
      self.seed = seed
      (v1, v2, v3, v4) = (seed &+ p1 &+ p2, seed &+ p2, seed, seed &- p1)
      pending.reserveCapacity(32)
    }

    public mutating func update(_ bytes: UnsafeRawBufferPointer) {
      total += bytes.count
      var i = 0
      if !pending.isEmpty {
        let take = min(32 - pending.count, bytes.count)
        pending += bytes[0..<take]
        i = take
        guard pending.count == 32 else { return }
        pending.withUnsafeBytes { stripe($0, at: 0) }
        pending.removeAll(keepingCapacity: true)
      }
      while i + 32 <= bytes.count {
        stripe(bytes, at: i)
        i += 32
      }
      pending += bytes[i...]
    }

    private mutating func stripe(_ bytes: UnsafeRawBufferPointer, at i: Int) {
      func word(_ at: Int) -> UInt64 {
        UInt64(littleEndian: bytes.loadUnaligned(fromByteOffset: at, as: UInt64.self))
      }
      v1 = round(v1, word(i))
      v2 = round(v2, word(i + 8))
      v3 = round(v3, word(i + 16))
      v4 = round(v4, word(i + 24))
    }

    /// The digest of every byte given so far.
    public func finish() -> UInt64 {
      let h = total >= 32 ? converge(v1, v2, v3, v4) : seed &+ p5
      return pending.withUnsafeBytes { XXH64.finish(h &+ UInt64(total), tail: $0) }
    }
  }
}
