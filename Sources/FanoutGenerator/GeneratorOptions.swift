public enum Profile: String, Sendable, CaseIterable {
  /// Mostly direct channels, groups of 3–300 with heavy-tailed sizes, a few
  /// broadcast channels of 10k–100k members; traffic mostly in directs and groups.
  case chat
  /// The same population, but most traffic goes into the broadcast channels.
  case broadcast
}

public struct GeneratorOptions: Sendable {
  public var users: Int
  public var messages: Int
  public var seed: UInt64
  public var profile: Profile
  public var out: String
  /// Contract v2's settings, columns, tables and traffic fields too.
  public var v2: Bool
  /// Contract v3 too (and v2): notification groups and read lines.
  public var v3 = false
  /// Where the two files are written, when not `out/snapshot.sqlite` and
  /// `out/traffic.ndjson` (`fanout gen` writes them aside, then renames).
  public var snapshotPath: String?
  public var trafficPath: String?

  public init(
    users: Int, messages: Int, seed: UInt64, profile: Profile, out: String, v2: Bool = false
  ) {
    self.users = users
    self.messages = messages
    self.seed = seed
    self.profile = profile
    self.out = out
    self.v2 = v2
  }
}

/// What was generated.
public struct GeneratorReport: Sendable {
  public var users = 0
  public var channels = 0
  public var memberships = 0
  public var devices = 0
  public var channelPrefs = 0
  public var messages = 0
  /// Pairs the traffic will produce (members minus senders).
  public var pairs = 0
  public var snapshotPath = ""
  public var trafficPath = ""
}

/// Why `fanout gen` generated or wrote nothing.
public struct GeneratorError: Error, CustomStringConvertible {
  public let description: String
  public init(description: String) { self.description = description }
}

/// A small, fast, seeded generator (SplitMix64).
struct Random {
  var state: UInt64
  init(seed: UInt64) { state = seed ^ 0x5DEE_CE66_D1CE_4E5B }

  mutating func next() -> UInt64 {
    state &+= 0x9E37_79B9_7F4A_7C15
    var z = state
    z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
    z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
    return z ^ (z >> 31)
  }

  /// Uniform in `0..<n`.
  mutating func below(_ n: Int) -> Int { Int((next() >> 11) % UInt64(max(1, n))) }
  mutating func unit() -> Double { Double(next() >> 11) / Double(1 << 53) }
  mutating func chance(_ p: Double) -> Bool { unit() < p }
}
