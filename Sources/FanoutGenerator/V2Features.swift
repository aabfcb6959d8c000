import FanoutSQLite
import FanoutSnapshot

/// Contract v2's features for `fanout gen --v2`, drawn from a random
/// stream of their own: the v1 part of the files is the same bytes with or
/// without them. Shaped on the vendors the contract cites: Rocket.Chat's
/// mentions-only rooms above 100 members, Mattermost's @all limit of 1,000,
/// Element's all-in-DMs default, Zulip's muted users and followed topics,
/// the "send without push" flag, Rocket.Chat's 120-second delay for users
/// active on another client, quiet hours that defer instead of drop, and a
/// throttle of one ordinary 'message' push per user and channel per hour
/// (Synapse's, Knock's and Novu's per-room or per-step throttles; the
/// generated traffic is spread over the day, so a tighter window would
/// rarely bite).
struct V2Features {
  var random: Random

  init(seed: UInt64) { random = Random(seed: seed ^ 0x7632_F00D) }

  /// Thread ids of a channel's traffic and preferences.
  static let threads = (0..<8).map { "t\($0)" }

  /// Writes the settings keys (the throttle among them), mention_all_notifications and quiet_action,
  /// channels' member_count, user_mutes, thread_prefs and presence.
  mutating func write(_ p: Population, _ db: Connection, userIDs: [String]) throws {
    try db.execute(
      """
      INSERT INTO settings VALUES ('default_chat_level.direct', 'all'),
        ('large_channel_members', '100'), ('large_channel_level', 'mentions'),
        ('mention_all_max_members', '1000'), ('presence_action', 'delay'),
        ('throttle_messages', '1'), ('throttle_window_ms', '3600000');
      """)
    let allOff = try db.prepare(
      "UPDATE users SET mention_all_notifications = 0 WHERE user_id = ?")
    let defers = try db.prepare("UPDATE users SET quiet_action = 'defer' WHERE user_id = ?")
    let active = try db.prepare("INSERT INTO presence VALUES (?, ?, ?)")
    for u in 0..<p.users {
      if random.chance(0.05) {
        allOff.bind(1, userIDs[u])
        try allOff.insert()
      }
      if random.chance(0.1) {
        defers.bind(1, userIDs[u])
        try defers.insert()
      }
      // Sessions of 5–60 minutes on the traffic's day.
      if random.chance(0.1) {
        for _ in 0..<(1 + random.below(4)) {
          let from = Generator.day + Int64(random.below(24 * 60)) * 60_000
          active.bind(1, userIDs[u])
          active.bind(2, from)
          active.bind(3, from + Int64(5 + random.below(56)) * 60_000)
          try active.insert()
        }
      }
    }
    // Half the broadcast channels are one shard of a channel twice the size.
    let count = try db.prepare("UPDATE channels SET member_count = ? WHERE channel_id = ?")
    for c in p.channels where c.kind == .broadcast && random.chance(0.5) {
      count.bind(1, Int64(2 * c.members.count))
      count.bind(2, c.id)
      try count.insert()
    }
    // Mutes and thread levels among the members of group channels.
    let mute = try db.prepare("INSERT OR IGNORE INTO user_mutes VALUES (?, ?)")
    let thread = try db.prepare("INSERT OR IGNORE INTO thread_prefs VALUES (?, ?, ?, ?)")
    let levels = ["all", "all", "mentions", "none", "none"]
    for c in p.channels where c.kind == .group {
      for u in c.members {
        if random.chance(0.01) {
          let other = c.members[random.below(c.members.count)]
          if other != u {
            mute.bind(1, userIDs[Int(u)])
            mute.bind(2, userIDs[Int(other)])
            try mute.insert()
          }
        }
        if random.chance(0.04) {
          thread.bind(1, userIDs[Int(u)])
          thread.bind(2, c.id)
          thread.bind(3, Self.threads[random.below(Self.threads.count)])
          thread.bind(4, levels[random.below(levels.count)])
          try thread.insert()
        }
      }
    }
  }

  /// The v2 fields of one message in a channel of `kind`: silent now and
  /// then, a thread for a third of group messages.
  mutating func fields(kind: Population.Kind) -> String {
    var text = ""
    if random.chance(0.02) { text += ",\"silent\":true" }
    if kind == .group && random.chance(0.3) {
      text += ",\"thread\":\"\(Self.threads[random.below(Self.threads.count)])\""
    }
    return text
  }
}
