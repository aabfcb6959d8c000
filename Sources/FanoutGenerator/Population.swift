#if canImport(Glibc)
  import Glibc
#endif

/// The generated people and channels, in memory, before they are written.
struct Population {
  /// ~40 real zones, the most common first (weights fall off with the index).
  static let zones = [
    "America/New_York", "Europe/London", "Asia/Shanghai", "America/Los_Angeles", "Asia/Kolkata",
    "Europe/Berlin",
    "America/Chicago", "Asia/Tokyo", "America/Sao_Paulo", "Europe/Paris", "Australia/Sydney",
    "Asia/Singapore",
    "America/Denver", "Europe/Madrid", "Asia/Dubai", "America/Mexico_City", "Europe/Moscow",
    "Asia/Seoul",
    "Africa/Lagos", "America/Toronto", "Europe/Istanbul", "Asia/Jakarta", "Africa/Cairo",
    "America/Bogota",
    "Asia/Manila", "Europe/Warsaw", "Asia/Bangkok", "America/Argentina/Buenos_Aires",
    "Africa/Johannesburg",
    "Pacific/Auckland", "Asia/Kathmandu", "America/St_Johns", "Asia/Tehran", "Europe/Dublin",
    "America/Anchorage",
    "Pacific/Honolulu", "Australia/Adelaide", "Asia/Karachi", "America/Halifax", "Atlantic/Azores",
  ]
  static let gateways = ["apns", "fcm", "webpush", "email"]

  enum Kind: String { case direct, group, broadcast }

  struct Channel {
    var id: String
    var kind: Kind
    var members: [Int32]  // sorted user numbers
  }

  var users: Int
  var zone: [Int8] = []  // -1 = NULL
  var channels: [Channel] = []

  init(users: Int, random: inout Random) {
    self.users = users
    zone.reserveCapacity(users)
    for _ in 0..<users {
      // Zipf-like: the first zones hold most users; 10% NULL (UTC).
      if random.chance(0.1) {
        zone.append(-1)
      } else {
        let u = random.unit()
        zone.append(
          Int8(min(Population.zones.count - 1, Int(Double(Population.zones.count) * u * u * u))))
      }
    }
    // Broadcast channels of 10k–100k members (fewer when there are fewer users).
    let broadcasts = max(2, users / 200_000)
    for b in 0..<broadcasts {
      let size = min(users, 10_000 + random.below(90_001))
      channels.append(
        Channel(
          id: Self.id("bc", b), kind: .broadcast, members: Self.sample(size, of: users, &random)))
    }
    // Direct channels: about 12 per user.
    let directs = users * 6
    var directChannels: [Channel] = []
    directChannels.reserveCapacity(directs)
    for d in 0..<directs {
      let a = Int32(random.below(users))
      var b = Int32(random.below(users))
      if b == a { b = (a + 1) % Int32(users) }
      directChannels.append(
        Channel(id: Self.id("dm", d), kind: .direct, members: a < b ? [a, b] : [b, a]))
    }
    // Groups of 3–300, heavy-tailed (Pareto, alpha 1.2), about 7 per user.
    var groupMemberships = 0
    var g = 0
    while groupMemberships < users * 7 {
      let size = min(300, min(users, Int(3.0 / Self.pow12(1 - random.unit()))))
      channels.append(
        Channel(
          id: Self.id("gr", g), kind: .group, members: Self.sample(max(3, size), of: users, &random)
        ))
      groupMemberships += size
      g += 1
    }
    // Ids sort as bc < dm < gr, so this order is channel_id byte order.
    channels.insert(contentsOf: directChannels, at: broadcasts)
  }

  /// `x^(1/1.2)`.
  static func pow12(_ x: Double) -> Double { exp(log(max(x, 1e-12)) / 1.2) }

  static func id(_ prefix: String, _ n: Int) -> String {
    let digits = String(n)
    return prefix + ":" + String(repeating: "0", count: max(0, 7 - digits.count)) + digits
  }

  static func userID(_ n: Int) -> String {
    let digits = String(n)
    return "u" + String(repeating: "0", count: max(0, 7 - digits.count)) + digits
  }

  /// `size` distinct users out of `users`, sorted.
  static func sample(_ size: Int, of users: Int, _ random: inout Random) -> [Int32] {
    if size * 4 >= users {
      // Dense: keep each user with probability size/users.
      let p = Double(size) / Double(users)
      return (0..<Int32(users)).filter { _ in random.chance(p) }
    }
    var picked = Set<Int32>(minimumCapacity: size)
    while picked.count < size { picked.insert(Int32(random.below(users))) }
    return picked.sorted()
  }
}
