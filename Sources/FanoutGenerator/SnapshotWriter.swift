import FanoutSQLite
import FanoutSnapshot

#if canImport(Glibc)
  import Glibc
#endif

/// Writes a population with its preferences into a new snapshot file.
enum SnapshotWriter {
  /// What `write` reports progress on: users written, or memberships.
  enum Phase { case users, channels }

  static func write(
    _ p: Population, to path: String, random: inout Random, v2: inout V2Features?, v3: Bool,
    report: inout GeneratorReport, progress: (Phase, Int) -> Void
  ) throws {
    unlink(path)
    let db = try Connection(path: path, writable: true)
    try db.execute("PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF;")
    try db.execute(v2 == nil ? SnapshotSchema.v1SQL : SnapshotSchema.createSQL)
    try db.execute("BEGIN")
    try db.execute(
      """
      INSERT INTO settings VALUES ('schema_version', '1'), ('default_chat_level', 'all'), ('default_call_level', 'all');
      INSERT INTO categories VALUES ('account', 'opt_in', 1), ('digest', 'opt_in', 0), ('marketing', 'opt_out', 0),
        ('newsletter', 'opt_out', 0), ('security', 'opt_in', 1), ('social', 'opt_in', 0);
      INSERT INTO category_gateways VALUES ('security', 'email', 1), ('account', 'apns', 1), ('account', 'email', 0),
        ('marketing', 'email', 0);
      """)
    let day = Generator.day
    let userIDs = (0..<p.users).map(Population.userID)  // formatted once, bound millions of times

    // Users: mostly defaults; some mentions-only or none, quiet hours, snoozes.
    let user = try db.prepare(
      """
      INSERT INTO users (user_id, timezone, chat_level, call_level, snooze_start, snooze_until,
        dnd_start, dnd_end, mention_notifications, pinned_notifications, show_preview)
      VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
      """)
    let weekly = try db.prepare("INSERT INTO dnd_weekly VALUES (?, ?, ?, ?)")
    let scope = try db.prepare(
      "INSERT INTO scope_prefs (user_id, scope, chat_level, show_preview) VALUES (?, ?, ?, ?)")
    let device = try db.prepare("INSERT INTO devices VALUES (?, ?, ?, ?)")
    let categoryPref = try db.prepare("INSERT INTO category_prefs VALUES (?, ?, ?, ?)")
    let gatewayPref = try db.prepare("INSERT INTO gateway_prefs VALUES (?, ?, ?)")
    let dailyWindows = [(1320, 420), (1380, 480), (0, 360), (780, 840), (1260, 1439), (600, 600)]
    var deviceID: Int64 = 1
    for u in 0..<p.users {
      if u % 16_384 == 0 { progress(.users, u) }
      let id = userIDs[u]
      user.bind(1, id)
      if p.zone[u] < 0 { user.bindNull(2) } else { user.bind(2, Population.zones[Int(p.zone[u])]) }
      let r = random.unit()
      if r < 0.10 {
        user.bind(3, "mentions")
      } else if r < 0.13 {
        user.bind(3, "none")
      } else {
        user.bindNull(3)
      }
      if random.chance(0.05) { user.bind(4, "none") } else { user.bindNull(4) }
      if random.chance(0.03) {
        // Snoozed around the traffic's day.
        let start = day + Int64(random.below(20)) * 3_600_000
        if random.chance(0.2) { user.bindNull(5) } else { user.bind(5, start) }
        user.bind(6, start + Int64(1 + random.below(8)) * 3_600_000)
      } else {
        user.bindNull(5)
        user.bindNull(6)
      }
      if random.chance(0.15) {
        let w = dailyWindows[random.below(dailyWindows.count)]
        user.bind(7, Int64(w.0))
        user.bind(8, Int64(w.1))
      } else {
        user.bindNull(7)
        user.bindNull(8)
      }
      for column in Int32(9)...11 {
        if random.chance(0.03) { user.bind(column, Int64(0)) } else { user.bindNull(column) }
      }
      try user.insert()

      if random.chance(0.03) {
        // Weekly: focus time on weekdays, or a quiet weekend.
        let weekend = random.chance(0.5)
        for day in weekend ? [6, 7] : [1, 2, 3, 4, 5] {
          weekly.bind(1, id)
          weekly.bind(2, Int64(day))
          weekly.bind(3, Int64(weekend ? 0 : 540))
          weekly.bind(4, Int64(weekend ? 1439 : 1020))
          try weekly.insert()
        }
      }
      if random.chance(0.05) {
        scope.bind(1, id)
        scope.bind(2, random.chance(0.5) ? "group" : "broadcast")
        scope.bind(3, random.chance(0.5) ? "mentions" : "none")
        if random.chance(0.3) { scope.bind(4, Int64(0)) } else { scope.bindNull(4) }
        try scope.insert()
      }
      let deviceCount = random.chance(0.5) ? 1 : (random.chance(0.7) ? 2 : 3)
      for _ in 0..<deviceCount {
        let r = random.unit()
        let gateway = r < 0.4 ? "apns" : (r < 0.8 ? "fcm" : (r < 0.95 ? "webpush" : "email"))
        device.bind(1, deviceID)
        device.bind(2, id)
        device.bind(3, gateway)
        device.bind(4, token(gateway, deviceID, user: id, &random))
        try device.insert()
        deviceID += 1
        report.devices += 1
      }
      if random.chance(0.05) {
        let rows: [(String, String?, String)] = [
          ("newsletter", nil, "opt_in"), ("social", nil, "opt_out"),
          ("marketing", "email", "opt_out"),
          ("security", "apns", "opt_out"), ("digest", nil, "opt_out"),
        ]
        for row in rows where random.chance(0.4) {
          categoryPref.bind(1, id)
          categoryPref.bind(2, row.0)
          if let g = row.1 { categoryPref.bind(3, g) } else { categoryPref.bindNull(3) }
          categoryPref.bind(4, row.2)
          try categoryPref.insert()
        }
      }
      if random.chance(0.02) {
        gatewayPref.bind(1, id)
        gatewayPref.bind(2, "email")
        gatewayPref.bind(3, Int64(1))
        try gatewayPref.insert()
      }
    }
    report.users = p.users

    // Channels, members, and channel overrides for about 10% of memberships.
    let channel = try db.prepare("INSERT INTO channels (channel_id, kind) VALUES (?, ?)")
    let member = try db.prepare("INSERT INTO members VALUES (?, ?)")
    let override = try db.prepare(
      "INSERT INTO channel_prefs (user_id, channel_id, chat_level, call_level, snooze_start, snooze_until) VALUES (?, ?, ?, ?, ?, ?)"
    )
    let levels = ["all", "mentions", "none", "default"]
    /// (user, channel, chat level, calls off, snooze start) per override.
    var overrides: [(user: Int32, channel: Int32, level: UInt8, callsOff: Bool, snooze: Int64?)] =
      []
    var memberships = 0
    for (channelNumber, c) in p.channels.enumerated() {
      if channelNumber % 4096 == 0 { progress(.channels, memberships) }
      memberships += c.members.count
      channel.bind(1, c.id)
      channel.bind(2, c.kind.rawValue)
      try channel.insert()
      for u in c.members {
        member.bind(1, c.id)
        member.bind(2, userIDs[Int(u)])
        try member.insert()
        if random.chance(c.kind == .direct ? 0.02 : 0.12) {
          let level = UInt8(random.below(levels.count))
          let callsOff = random.chance(0.1)
          let snooze = random.chance(0.1) ? day + Int64(random.below(24)) * 3_600_000 : nil
          overrides.append((u, Int32(channelNumber), level, callsOff, snooze))
        }
      }
      report.memberships += c.members.count
    }
    // In primary-key order (user_id, channel_id), so the index only appends.
    overrides.sort { ($0.user, $0.channel) < ($1.user, $1.channel) }
    for o in overrides {
      override.bind(1, userIDs[Int(o.user)])
      override.bind(2, p.channels[Int(o.channel)].id)
      override.bind(3, levels[Int(o.level)])
      if o.callsOff { override.bind(4, "none") } else { override.bindNull(4) }
      if let start = o.snooze {
        override.bind(5, start)
        override.bind(6, start + Int64(1 + random.below(12)) * 3_600_000)
      } else {
        override.bindNull(5)
        override.bindNull(6)
      }
      try override.insert()
    }
    report.channelPrefs = overrides.count
    report.channels = p.channels.count
    try v2?.write(p, db, userIDs: userIDs)
    if v3 { try db.execute(V3Features.settingsSQL) }
    try db.execute("COMMIT")
  }

  /// A token shaped like the gateway's: hex for APNs, base64-ish for FCM, a URL for web push.
  static func token(_ gateway: String, _ id: Int64, user: String, _ random: inout Random) -> String
  {
    let hex = String(random.next(), radix: 16) + String(random.next(), radix: 16)
    switch gateway {
    case "apns": return hex + String(id, radix: 16)
    case "fcm": return "f" + String(id, radix: 36) + ":APA91b" + hex
    case "webpush": return "https://push.example.net/wp/" + hex + "/" + String(id)
    default: return user + "+" + String(id) + "@mail.example.com"
    }
  }
}
