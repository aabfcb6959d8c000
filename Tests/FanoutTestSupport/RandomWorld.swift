import Foundation

/// A seeded generator (PCG-style LCG): the same seed gives the same world everywhere.
public struct SeededRandom: RandomNumberGenerator {
  var state: UInt64
  public init(seed: UInt64) { state = seed &* 0x9E37_79B9_7F4A_7C15 | 1 }
  public mutating func next() -> UInt64 {
    state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
    var z = state
    z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
    z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
    return z ^ (z >> 31)
  }
}

/// A random preferences world as plain Swift values, written out as SQL for
/// the real loader and evaluated by `ReferenceEvaluator` straight from the
/// contract's text, without any of the index's precomputation.
public struct RandomWorld {
  public struct Prefs {
    public var chat: String?, call: String?
    public var snoozeStart: Int64?, snoozeUntil: Int64?
    public var mention: Int?, pinned: Int?, preview: Int?
    /// Contract v2: mention_all_notifications.
    public var mentionAll: Int?
  }
  public struct User {
    public var id: String, timezone: String?, prefs: Prefs
    public var dnd: (Int, Int)?
    public var weekly: [(day: Int, start: Int, end: Int)]
  }
  public struct Device { public var id: Int64, user: String, gateway: String, token: String }
  public struct Category { public var name: String, defaultPref: String, mandatory: Bool }

  public var defaultChat: String?, defaultCall: String?
  public var users: [User] = []
  public var channels: [(id: String, kind: String)] = []
  public var members: [String: [String]] = [:]  // channel -> users
  public var scopePrefs: [String: Prefs] = [:]  // "user|scope"
  public var channelPrefs: [String: Prefs] = [:]  // "user|channel"
  public var devices: [Device] = []
  public var categories: [Category] = []
  public var mandatoryGateways: Set<String> = []  // "category|gateway"
  public var categoryPrefs: [String: String] = [:]  // "user|category|gateway-or-empty"
  public var restricted: Set<String> = []  // "user|gateway"
  public var messages: [String] = []

  // Contract v2 (section 5), drawn only for `v2` worlds.
  public var v2 = false
  public var kindDefaults: [String: String] = [:]  // kind -> chat level
  public var largeChannel: (members: Int, level: String)?
  public var mentionAllMax: Int?
  public var memberCount: [String: Int] = [:]  // channel -> member_count
  public var mutes: Set<String> = []  // "user|muted"
  public var threadPrefs: [String: String] = [:]  // "user|channel|thread" -> chat level
  static let threads = ["t1", "t2", "", "t 3"]
  public var presenceAction: String?
  public var presenceDelay: Int64?
  public var presence: [(user: String, from: Int64, until: Int64)] = []
  public var defaultQuietAction: String?
  public var quietAction: [String: String] = [:]  // user -> drop | defer
  public var throttle: (messages: Int, window: Int64)?
  /// Contract v3: `notification_groups` = 'on' with these caps (nil: off).
  public var groups: (size: Int?, count: Int?)?

  public static let zones = [
    "UTC", "America/New_York", "Asia/Shanghai", "Europe/Berlin", "Australia/Sydney", "Asia/Kolkata",
    "America/Los_Angeles", "Pacific/Auckland", "America/Sao_Paulo", "Asia/Kathmandu",
  ]
  static let gateways = ["apns", "fcm", "email", "webpush"]
  /// 2026-03-06T00:00Z: the window covers the US and (a week later) no other change; Nov too.
  static let baseTimes: [Int64] = [1_772_755_200_000, 1_793_232_000_000, 1_774_656_000_000]

  /// A world from `seed`; with `v2`, contract v2's settings, columns,
  /// tables and traffic fields too (drawn from a second stream, after the
  /// v1 world, which is the same as without).
  public init(
    seed: UInt64, users userCount: Int = 40, messages messageCount: Int = 300, v2: Bool = false,
    v3: Bool = false
  ) {
    var rng = SeededRandom(seed: seed)
    func maybe<T>(_ p: Double, _ value: @autoclosure () -> T) -> T? {
      Double.random(in: 0..<1, using: &rng) < p ? value() : nil
    }
    let base = Self.baseTimes.randomElement(using: &rng)!
    func time() -> Int64 {
      let t = base + Int64.random(in: 0..<(7 * 86_400_000), using: &rng)
      guard Double.random(in: 0..<1, using: &rng) < 0.5 else { return t }
      // On a local edge minute of some zone: where window bounds bite.
      let edges: [Int64] = [
        0, 1, 29, 30, 419, 420, 599, 600, 1319, 1320, 1379, 1380, 1437, 1438, 1439,
      ]
      let zone = TimeZone(identifier: Self.zones.randomElement(using: &rng)!)!
      let offset =
        Int64(zone.secondsFromGMT(for: Date(timeIntervalSince1970: Double(t) / 1000))) * 1000
      let localDay = (t + offset) / 86_400_000 * 86_400_000
      return localDay - offset + edges.randomElement(using: &rng)! * 60_000
        + Int64.random(in: 0..<60_000, using: &rng)
    }
    func prefs(chatValues: [String]) -> Prefs {
      var p = Prefs()
      p.chat = maybe(0.4, chatValues.randomElement(using: &rng)!)
      p.call = maybe(0.3, ["all", "none"].randomElement(using: &rng)!)
      if Double.random(in: 0..<1, using: &rng) < 0.25 {
        p.snoozeStart = maybe(0.7, time())
        p.snoozeUntil = maybe(0.9, time())
      }
      p.mention = maybe(0.2, Int.random(in: 0...1, using: &rng))
      p.pinned = maybe(0.2, Int.random(in: 0...1, using: &rng))
      p.preview = maybe(0.2, Int.random(in: 0...1, using: &rng))
      return p
    }
    defaultChat = maybe(0.3, ["all", "mentions", "none"].randomElement(using: &rng)!)
    defaultCall = maybe(0.3, ["all", "none"].randomElement(using: &rng)!)

    let names = ["u", "U", "é", "user", "Zed", "a b"]
    for i in 0..<userCount {
      let id = names[i % names.count] + String(i * 7 % 13) + "-" + String(i)
      var user = User(
        id: id, timezone: maybe(0.8, Self.zones.randomElement(using: &rng)!),
        prefs: prefs(chatValues: ["all", "mentions", "none"]), dnd: nil, weekly: [])
      if Double.random(in: 0..<1, using: &rng) < 0.35 {
        let edges = [0, 1, 30, 420, 600, 1320, 1380, 1438, 1439]
        user.dnd = (edges.randomElement(using: &rng)!, edges.randomElement(using: &rng)!)
      }
      if Double.random(in: 0..<1, using: &rng) < 0.2 {
        for _ in 0..<Int.random(in: 1...4, using: &rng) {
          let start = Int.random(in: 0..<1439, using: &rng)
          let end =
            Bool.random(using: &rng) ? 1439 : Int.random(in: (start + 1)...1439, using: &rng)
          user.weekly.append((Int.random(in: 1...7, using: &rng), start, end))
        }
      }
      users.append(user)
      for k in 0..<Int.random(in: 0...3, using: &rng) {
        let gateway = Self.gateways.randomElement(using: &rng)!
        devices.append(
          Device(id: Int64(1000 - i * 4 - k), user: id, gateway: gateway, token: "t-\(i)-\(k)"))
      }
      for g in Self.gateways where Double.random(in: 0..<1, using: &rng) < 0.08 {
        restricted.insert(id + "|" + g)
      }
      for scope in ["direct", "group", "broadcast"]
      where Double.random(in: 0..<1, using: &rng) < 0.15 {
        scopePrefs[id + "|" + scope] = prefs(chatValues: ["all", "mentions", "none"])
      }
    }
    for c in 0..<8 {
      let kind = ["direct", "group", "broadcast"][c % 3]
      let id = "\(kind):\(c)"
      channels.append((id, kind))
      let size = kind == "direct" ? 2 : Int.random(in: 2...userCount, using: &rng)
      members[id] = Array(users.map(\.id).shuffled(using: &rng).prefix(size))
      for u in users.map(\.id) where Double.random(in: 0..<1, using: &rng) < 0.12 {
        channelPrefs[u + "|" + id] = prefs(chatValues: ["all", "mentions", "none", "default"])
      }
    }
    for (i, name) in ["alerts", "news", "promo"].enumerated() {
      categories.append(
        Category(
          name: name, defaultPref: Bool.random(using: &rng) ? "opt_in" : "opt_out",
          mandatory: i == 0 || Bool.random(using: &rng) && i == 2))
      for g in Self.gateways where Double.random(in: 0..<1, using: &rng) < 0.25 {
        mandatoryGateways.insert(name + "|" + g)
      }
    }
    for u in users.map(\.id) {
      for c in categories.map(\.name) {
        for g in [""] + Self.gateways where Double.random(in: 0..<1, using: &rng) < 0.06 {
          categoryPrefs[u + "|" + c + "|" + g] = Bool.random(using: &rng) ? "opt_in" : "opt_out"
        }
      }
    }
    for i in 0..<messageCount {
      let channel = channels.randomElement(using: &rng)!.id
      let pool = members[channel]!
      var fields = ["\"id\":\"m\(i)\"", "\"channel\":\"\(channel)\"", "\"ts\":\(time())"]
      if let sender = maybe(
        0.8, Bool.random(using: &rng) ? pool.randomElement(using: &rng)! : "ghost")
      {
        fields.append("\"sender\":\"\(sender)\"")
      }
      if let kind = maybe(0.5, ["message", "call", "pinned"].randomElement(using: &rng)!) {
        fields.append("\"kind\":\"\(kind)\"")
      }
      if Double.random(in: 0..<1, using: &rng) < 0.4 {
        let mentioned = (0..<Int.random(in: 1...4, using: &rng)).map { _ in
          Bool.random(using: &rng)
            ? pool.randomElement(using: &rng)! : users.randomElement(using: &rng)!.id
        }
        fields.append("\"mentions\":[" + mentioned.map { "\"\($0)\"" }.joined(separator: ",") + "]")
      }
      if Double.random(in: 0..<1, using: &rng) < 0.1 { fields.append("\"mention_all\":true") }
      if let r = maybe(0.2, pool.randomElement(using: &rng)!) {
        fields.append("\"reply_to\":\"\(r)\"")
      }
      if let c = maybe(0.3, categories.randomElement(using: &rng)!.name) {
        fields.append("\"category\":\"\(c)\"")
      }
      if Double.random(in: 0..<1, using: &rng) < 0.1 { fields.append("\"force\":true") }
      messages.append("{" + fields.joined(separator: ",") + "}")
    }
    if v2 || v3 { addV2(seed: seed) }
    if v3 { addV3(seed: seed) }
  }

  /// Contract v3 (drawn from a third stream): grouping on with small caps
  /// or none, and read lines among the messages, by members and others, at
  /// times around the messages' (so that reads remove some notifications,
  /// leave later ones, and cancel deferred or delayed ones).
  private mutating func addV3(seed: UInt64) {
    var rng = SeededRandom(seed: seed ^ 0xC0DE_0003)
    func chance(_ p: Double) -> Bool { Double.random(in: 0..<1, using: &rng) < p }
    groups = (
      chance(0.6) ? Int.random(in: 1...3, using: &rng) : nil,
      chance(0.6) ? Int.random(in: 1...3, using: &rng) : nil
    )
    var lines: [String] = []
    for (i, line) in messages.enumerated() {
      lines.append(line)
      guard chance(0.25) else { continue }
      let object = try! JSONSerialization.jsonObject(with: Data(line.utf8)) as! [String: Any]
      let channel =
        chance(0.8) ? object["channel"] as! String : channels.randomElement(using: &rng)!.id
      let reader =
        chance(0.85)
        ? members[channel]!.randomElement(using: &rng)!
        : chance(0.5) ? users.randomElement(using: &rng)!.id : "ghost"
      let ts =
        (object["ts"] as! Int64)
        + [-60_000, -1, 0, 1, 60_000, 3_600_000, 86_400_000].randomElement(using: &rng)!
      lines.append(
        #"{"id":"r\#(i % 7)","event":"read","channel":"\#(channel)","user":"\#(reader)","ts":\#(ts)}"#
      )
    }
    messages = lines
  }

  private mutating func addV2(seed: UInt64) {
    v2 = true
    var rng = SeededRandom(seed: seed ^ 0xC0DE_0002)
    func chance(_ p: Double) -> Bool { Double.random(in: 0..<1, using: &rng) < p }
    func flag() -> Int? { chance(0.25) ? Int.random(in: 0...1, using: &rng) : nil }
    let levels = ["all", "mentions", "none"]
    let sizes = channels.map { members[$0.id]!.count }
    for kind in ["direct", "group", "broadcast"] where chance(0.35) {
      kindDefaults[kind] = levels.randomElement(using: &rng)!
    }
    // Thresholds at a channel's size, one below or one above: the edges.
    func threshold() -> Int {
      max(1, sizes.randomElement(using: &rng)! + Int.random(in: -1...1, using: &rng))
    }
    if chance(0.5) {
      largeChannel = (threshold(), ["mentions", "none"].randomElement(using: &rng)!)
    }
    if chance(0.5) { mentionAllMax = threshold() }
    for c in channels where chance(0.3) {
      memberCount[c.id] =
        members[c.id]!.count + (chance(0.5) ? 0 : Int.random(in: 1...30, using: &rng))
    }
    for i in users.indices {
      users[i].prefs.mentionAll = flag()
      if chance(0.2) {
        for _ in 0..<Int.random(in: 1...3, using: &rng) {
          mutes.insert(users[i].id + "|" + users.randomElement(using: &rng)!.id)
        }
      }
    }
    for key in scopePrefs.keys.sorted() { scopePrefs[key]!.mentionAll = flag() }
    for key in channelPrefs.keys.sorted() { channelPrefs[key]!.mentionAll = flag() }
    for c in channels {
      for u in users.map(\.id) where chance(0.15) {
        threadPrefs[u + "|" + c.id + "|" + Self.threads.randomElement(using: &rng)!] =
          levels.randomElement(using: &rng)!
      }
    }
    // Part 2: presence windows around message times, deferral.
    presenceAction =
      chance(0.7) ? ["ignore", "suppress", "delay"].randomElement(using: &rng)! : nil
    presenceDelay = chance(0.6) ? [0, 1, 60_000, 3_600_000].randomElement(using: &rng)! : nil
    let times = messages.map { line -> Int64 in
      let object = try! JSONSerialization.jsonObject(with: Data(line.utf8)) as! [String: Any]
      return object["ts"] as! Int64
    }
    for u in users where chance(0.6) {
      for _ in 0..<Int.random(in: 2...6, using: &rng) {
        let at = times.randomElement(using: &rng)! + Int64.random(in: -1...1, using: &rng)
        let from = at - [0, 1, 60_000, 3_600_000].randomElement(using: &rng)!
        let until = at + [-5, 0, 1, 60_000, 3_600_000].randomElement(using: &rng)!
        presence.append((u.id, from, until))
      }
    }
    defaultQuietAction = chance(0.5) ? ["drop", "defer"].randomElement(using: &rng)! : nil
    for u in users where chance(0.4) {
      quietAction[u.id] = ["drop", "defer", "defer"].randomElement(using: &rng)!
    }
    // Throttle windows from a minute to days; the world's lines come in no
    // order of time, so earlier lines may be later in time.
    if chance(0.6) {
      throttle = (
        [1, 1, 2, 3].randomElement(using: &rng)!,
        [60_000, 3_600_000, 86_400_000, 3 * 86_400_000].randomElement(using: &rng)!
      )
    }
    for i in messages.indices {
      var extra: [String] = []
      if chance(0.08) { extra.append("\"silent\":\(chance(0.8))") }
      if chance(0.5) { extra.append("\"thread\":\"\(Self.threads.randomElement(using: &rng)!)\"") }
      if chance(0.15) {
        // Mention-all more often, to reach its switches.
        extra.append("\"mention_all\":true")
      }
      if !extra.isEmpty {
        messages[i] = String(messages[i].dropLast()) + "," + extra.joined(separator: ",") + "}"
      }
    }
  }

  /// A new snapshot file holding the world (v2 worlds on the v2 schema).
  public func makeSnapshot() -> String {
    SQLiteFixture.make(
      SQLiteFixture.header + sql, schema: v2 ? SQLiteFixture.v2Schema : SQLiteFixture.schema)
  }

  /// The world as SQL against the contract's schema.
  public var sql: String {
    func q(_ s: String?) -> String {
      s.map { "'" + $0.replacingOccurrences(of: "'", with: "''") + "'" } ?? "NULL"
    }
    func n<T>(_ v: T?) -> String { v.map { "\($0)" } ?? "NULL" }
    func p(_ p: Prefs) -> String {
      ([
        q(p.chat), q(p.call), n(p.snoozeStart), n(p.snoozeUntil), n(p.mention), n(p.pinned),
        n(p.preview),
      ] + (v2 ? [n(p.mentionAll)] : [])).joined(separator: ", ")
    }
    let v2Column = v2 ? ", mention_all_notifications" : ""
    var out = ""
    if let defaultChat {
      out += "INSERT INTO settings VALUES ('default_chat_level', \(q(defaultChat)));\n"
    }
    if let defaultCall {
      out += "INSERT INTO settings VALUES ('default_call_level', \(q(defaultCall)));\n"
    }
    for u in users {
      out +=
        "INSERT INTO users (user_id, timezone, chat_level, call_level, snooze_start, snooze_until, mention_notifications, pinned_notifications, show_preview\(v2Column), dnd_start, dnd_end\(v2 ? ", quiet_action" : "")) VALUES (\(q(u.id)), \(q(u.timezone)), \(p(u.prefs)), \(n(u.dnd?.0)), \(n(u.dnd?.1))\(v2 ? ", " + q(quietAction[u.id]) : ""));\n"
      for w in u.weekly {
        out += "INSERT INTO dnd_weekly VALUES (\(q(u.id)), \(w.day), \(w.start), \(w.end));\n"
      }
    }
    for c in channels {
      out +=
        v2
        ? "INSERT INTO channels (channel_id, kind, member_count) VALUES (\(q(c.id)), \(q(c.kind)), \(n(memberCount[c.id])));\n"
        : "INSERT INTO channels VALUES (\(q(c.id)), \(q(c.kind)));\n"
      for u in members[c.id]! { out += "INSERT INTO members VALUES (\(q(c.id)), \(q(u)));\n" }
    }
    let columns =
      "chat_level, call_level, snooze_start, snooze_until, mention_notifications, pinned_notifications, show_preview"
      + v2Column
    for (key, prefs) in scopePrefs.sorted(by: { $0.key < $1.key }) {
      let parts = key.split(separator: "|").map(String.init)
      out +=
        "INSERT INTO scope_prefs (user_id, scope, \(columns)) VALUES (\(q(parts[0])), \(q(parts[1])), \(p(prefs)));\n"
    }
    for (key, prefs) in channelPrefs.sorted(by: { $0.key < $1.key }) {
      let parts = key.split(separator: "|").map(String.init)
      out +=
        "INSERT INTO channel_prefs (user_id, channel_id, \(columns)) VALUES (\(q(parts[0])), \(q(parts[1])), \(p(prefs)));\n"
    }
    for d in devices {
      out += "INSERT INTO devices VALUES (\(d.id), \(q(d.user)), \(q(d.gateway)), \(q(d.token)));\n"
    }
    for c in categories {
      out +=
        "INSERT INTO categories VALUES (\(q(c.name)), \(q(c.defaultPref)), \(c.mandatory ? 1 : 0));\n"
    }
    for key in mandatoryGateways.sorted() {
      let parts = key.split(separator: "|").map(String.init)
      out += "INSERT INTO category_gateways VALUES (\(q(parts[0])), \(q(parts[1])), 1);\n"
    }
    for (key, pref) in categoryPrefs.sorted(by: { $0.key < $1.key }) {
      let parts = key.split(separator: "|", omittingEmptySubsequences: false).map(String.init)
      out +=
        "INSERT INTO category_prefs VALUES (\(q(parts[0])), \(q(parts[1])), \(parts[2].isEmpty ? "NULL" : q(parts[2])), \(q(pref)));\n"
    }
    for key in restricted.sorted() {
      let parts = key.split(separator: "|").map(String.init)
      out += "INSERT INTO gateway_prefs VALUES (\(q(parts[0])), \(q(parts[1])), 1);\n"
    }
    for (kind, level) in kindDefaults.sorted(by: { $0.key < $1.key }) {
      out += "INSERT INTO settings VALUES ('default_chat_level.\(kind)', \(q(level)));\n"
    }
    if let largeChannel {
      out += "INSERT INTO settings VALUES ('large_channel_members', '\(largeChannel.members)');\n"
      out += "INSERT INTO settings VALUES ('large_channel_level', \(q(largeChannel.level)));\n"
    }
    if let mentionAllMax {
      out += "INSERT INTO settings VALUES ('mention_all_max_members', '\(mentionAllMax)');\n"
    }
    if let presenceAction {
      out += "INSERT INTO settings VALUES ('presence_action', \(q(presenceAction)));\n"
    }
    if let presenceDelay {
      out += "INSERT INTO settings VALUES ('presence_delay_ms', '\(presenceDelay)');\n"
    }
    if let groups {
      out += "INSERT INTO settings VALUES ('notification_groups', 'on');\n"
      if let size = groups.size {
        out += "INSERT INTO settings VALUES ('notification_group_size_max', '\(size)');\n"
      }
      if let count = groups.count {
        out += "INSERT INTO settings VALUES ('notification_group_count_max', '\(count)');\n"
      }
    }
    if let throttle {
      out += "INSERT INTO settings VALUES ('throttle_messages', '\(throttle.messages)');\n"
      out += "INSERT INTO settings VALUES ('throttle_window_ms', '\(throttle.window)');\n"
    }
    if let defaultQuietAction {
      out += "INSERT INTO settings VALUES ('default_quiet_action', \(q(defaultQuietAction)));\n"
    }
    for w in presence {
      out += "INSERT INTO presence VALUES (\(q(w.user)), \(w.from), \(w.until));\n"
    }
    for key in mutes.sorted() {
      let parts = key.split(separator: "|").map(String.init)
      out += "INSERT INTO user_mutes VALUES (\(q(parts[0])), \(q(parts[1])));\n"
    }
    for (key, level) in threadPrefs.sorted(by: { $0.key < $1.key }) {
      let parts = key.split(separator: "|", omittingEmptySubsequences: false).map(String.init)
      out +=
        "INSERT INTO thread_prefs VALUES (\(q(parts[0])), \(q(parts[1])), \(q(parts[2])), \(q(level)));\n"
    }
    return out
  }
}

/// The seeds of a seeded differential test: `seeds`, as CI runs them, and
/// with `FANOUT_DIFFERENTIAL_SEEDS=N` N more of their own (from
/// 100,000 + 1,000 × the first, plus `FANOUT_DIFFERENTIAL_FROM` if set, so
/// that a new campaign can draw seeds no earlier one drew), for a longer
/// campaign than the suite's minutes allow. A test's checks that its worlds
/// reach given rules hold for `seeds` alone: other seeds may draw worlds
/// that do not.
public func differentialSeeds(_ seeds: ClosedRange<UInt64>) -> [UInt64] {
  let environment = ProcessInfo.processInfo.environment
  let more = environment["FANOUT_DIFFERENTIAL_SEEDS"].flatMap { Int($0) }
  guard let more, more > 0 else { return Array(seeds) }
  let from = environment["FANOUT_DIFFERENTIAL_FROM"].flatMap { UInt64($0) } ?? 0
  let first = 100_000 + 1_000 * seeds.lowerBound &+ from
  return Array(seeds) + (0..<UInt64(more)).map { first &+ $0 }
}
