import Foundation

/// The contract's sections 3 and 5.3, written as plainly as possible over a
/// `RandomWorld`: dictionaries, strings and Foundation's `TimeZone` (ICU's
/// copy of the tz data, independent of Fanout's TZif reader).
public struct ReferenceEvaluator {
  let world: RandomWorld

  public init(_ world: RandomWorld) { self.world = world }

  /// `message/user` → trigger (`trigger@deliver_at` when deferred), or `-reason`.
  public func decisions() -> [String: String] {
    var out: [String: String] = [:]
    for pair in pairs() { out["\(pair.message)/\(pair.user)"] = pair.outcome }
    return out
  }

  /// `message/gateway` → the recipients' `user:device` list, in output order.
  public func deliveries() -> [String: [String]] {
    var out: [String: [String]] = [:]
    for pair in pairs() {
      for device in pair.devices {
        out["\(pair.message)/\(device.gateway)", default: []].append("\(pair.user):\(device.id)")
      }
    }
    return out
  }

  /// Every pair, in output order (lines in input order, users in byte
  /// order), with rule 8 applied over the lines in order: a 'message' pair
  /// is throttled when the user was delivered `messages` or more 'message'
  /// pairs in the channel by earlier lines with ts' in (ts − window, ts].
  func pairs() -> [(message: String, user: String, outcome: String, devices: [RandomWorld.Device])]
  {
    var out: [(String, String, String, [RandomWorld.Device])] = []
    var counted: [String: [Int64]] = [:]  // "user|channel" -> ts of counted lines
    for line in world.messages {
      let m = try! JSONSerialization.jsonObject(with: Data(line.utf8)) as! [String: Any]
      if m["event"] as? String == "read" { continue }
      let channel = m["channel"] as! String
      let ts = m["ts"] as! Int64
      let recipients = world.members[channel]!.filter { $0 != m["sender"] as? String }
        .sorted { Array($0.utf8).lexicographicallyPrecedes(Array($1.utf8)) }
      for user in recipients {
        var (outcome, devices) = decide(m, channel: channel, user: user)
        if let throttle = world.throttle, outcome.split(separator: "@").first == "message" {
          let key = user + "|" + channel
          let recent = counted[key, default: []].filter { ts - throttle.window < $0 && $0 <= ts }
          if recent.count >= throttle.messages {
            (outcome, devices) = ("-throttled", [])
          } else {
            counted[key, default: []].append(ts)
          }
        }
        out.append(("\(m["id"]!)", user, outcome, devices))
      }
    }
    return out.map { (message: $0.0, user: $0.1, outcome: $0.2, devices: $0.3) }
  }

  /// Section 6.3 over the lines in order, for a world with notification
  /// groups on: per delivered pair (`message/user`) its fields as
  /// `group,notification,badge,hide ids`, the update lines as `line|user|
  /// channel|removed|cancelled|badge`, and the run's counts.
  public func notifications() -> (
    fields: [String: String], updates: [String],
    counts: (hidden: Int, removed: Int, cancelled: Int, unread: Int)
  ) {
    struct Note {
      var id: Int
      var group: Int
      var channel: String
      var ts: Int64
      var due: Int64
      var visible = true
      var unread = true
    }
    let caps = world.groups!
    var notes: [String: [Note]] = [:]
    var groupIDs: [String: [String: Int]] = [:]  // user -> "channel|type" -> id
    var fields: [String: String] = [:]
    var updates: [String] = []
    var hidden = 0
    var removedCount = 0
    var cancelledCount = 0
    var allPairs = pairs()[...]
    for (n, line) in world.messages.enumerated() {
      let m = try! JSONSerialization.jsonObject(with: Data(line.utf8)) as! [String: Any]
      let channel = m["channel"] as! String
      let ts = m["ts"] as! Int64
      if m["event"] as? String == "read" {
        let user = m["user"] as! String
        guard world.members[channel]!.contains(user) else { continue }
        var removed: [Int] = []
        var cancelled: [Int] = []
        for k in notes[user, default: []].indices {
          let note = notes[user]![k]
          guard note.unread, note.channel == channel, note.ts <= ts else { continue }
          notes[user]![k].unread = false
          notes[user]![k].visible = false
          removed.append(note.id)
          if note.due > ts { cancelled.append(note.id) }
        }
        removedCount += removed.count
        cancelledCount += cancelled.count
        if !removed.isEmpty {
          let badge = notes[user]!.filter(\.unread).count
          updates.append("\(n + 1)|\(user)|\(channel)|\(removed)|\(cancelled)|\(badge)")
        }
        continue
      }
      let id = "\(m["id"]!)"
      while let pair = allPairs.first, pair.message == id {
        allPairs = allPairs.dropFirst()
        guard !pair.outcome.hasPrefix("-") else { continue }
        let parts = pair.outcome.split(separator: "@")
        let type = parts[0] == "call" ? "calls" : parts[0] == "message" ? "messages" : "mentions"
        let due = parts.count > 1 ? Int64(parts[1])! : ts
        let user = pair.user
        let key = channel + "|" + type
        let group = groupIDs[user]?[key] ?? (groupIDs[user]?.count ?? 0) + 1
        groupIDs[user, default: [:]][key] = group
        let note = Note(
          id: (notes[user]?.count ?? 0) + 1, group: group, channel: channel, ts: ts, due: due)
        notes[user, default: []].append(note)
        var hid: [Int] = []
        func visible(_ g: Int) -> [Int] {
          notes[user]!.indices.filter { notes[user]![$0].visible && notes[user]![$0].group == g }
        }
        if let size = caps.size {
          while visible(group).count > size {
            let oldest = visible(group).min { notes[user]![$0].id < notes[user]![$1].id }!
            notes[user]![oldest].visible = false
            hid.append(notes[user]![oldest].id)
          }
        }
        if let count = caps.count {
          while Set(notes[user]!.filter(\.visible).map(\.group)).count > count {
            let others = Set(notes[user]!.filter { $0.visible && $0.group != group }.map(\.group))
            let victim = others.min { a, b in
              visible(a).map { notes[user]![$0].id }.max()!
                < visible(b).map { notes[user]![$0].id }.max()!
            }!
            for k in visible(victim) {
              notes[user]![k].visible = false
              hid.append(notes[user]![k].id)
            }
          }
        }
        hidden += hid.count
        let badge = notes[user]!.filter(\.unread).count
        fields["\(id)/\(user)"] = "\(group),\(note.id),\(badge),\(hid.sorted())"
      }
    }
    let unread = notes.values.reduce(0) { $0 + $1.filter(\.unread).count }
    return (fields, updates, (hidden, removedCount, cancelledCount, unread))
  }

  func decide(_ m: [String: Any], channel: String, user: String) -> (
    outcome: String, devices: [RandomWorld.Device]
  ) {
    let u = world.users.first { $0.id == user }!
    let kind = world.channels.first { $0.id == channel }!.kind
    let levels = [
      world.channelPrefs[user + "|" + channel], world.scopePrefs[user + "|" + kind], u.prefs,
    ]
    func resolve(_ field: (RandomWorld.Prefs) -> String?, _ fallback: String) -> String {
      for level in levels { if let p = level, let v = field(p), v != "default" { return v } }
      return fallback
    }
    func flag(_ field: (RandomWorld.Prefs) -> Int?) -> Bool {
      for level in levels { if let p = level, let v = field(p) { return v == 1 } }
      return true
    }
    let ts = m["ts"] as! Int64
    let force = m["force"] as? Bool ?? false
    let isCall = m["kind"] as? String == "call"
    // 0. silent
    if m["silent"] as? Bool == true { return ("-silent", []) }
    // 1. sender_muted
    if let sender = m["sender"] as? String, world.mutes.contains(user + "|" + sender) {
      return ("-sender_muted", [])
    }
    // 2. snoozed: the end of the latest window holding t, if any.
    func snoozeEnd(_ t: Int64) -> Int64? {
      var end: Int64? = nil
      for level in levels {
        guard let p = level, let until = p.snoozeUntil else { continue }
        if t >= (p.snoozeStart ?? .min) && t < until { end = max(end ?? .min, until) }
      }
      return end
    }
    let zone = TimeZone(identifier: u.timezone ?? "UTC")!
    var calendar = Calendar(identifier: .gregorian)
    calendar.timeZone = zone
    // 3. dnd at t.
    func inDND(_ t: Int64) -> Bool {
      let date = Date(timeIntervalSince1970: Double(t) / 1000)
      let parts = calendar.dateComponents([.weekday, .hour, .minute], from: date)
      let minute = parts.hour! * 60 + parts.minute!
      let weekday = (parts.weekday! + 5) % 7 + 1  // Foundation: 1 = Sunday
      func inWindow(_ start: Int, _ end: Int) -> Bool {
        let stop = end == 1439 ? 1440 : end
        if start == end { return true }
        if start < end { return minute >= start && minute < stop }
        return minute >= start || minute < stop
      }
      if !u.weekly.isEmpty {
        return u.weekly.contains(where: {
          $0.day == weekday && minute >= $0.start && minute < ($0.end == 1439 ? 1440 : $0.end)
        })
      }
      return u.dnd.map { inWindow($0.0, $0.1) } ?? false
    }
    var deliverAt = ts
    if !force, let quiet = snoozeEnd(ts) != nil ? "-snoozed" : inDND(ts) ? "-dnd" : nil {
      // Deferral: the first free instant within 7 days, stepping through
      // snooze ends and UTC minutes (the world's zones keep whole minutes).
      let defers = (world.quietAction[user] ?? world.defaultQuietAction) == "defer"
      var free: Int64? = nil
      var t = ts
      while defers && !isCall && t < ts + 604_800_000 {
        if let end = snoozeEnd(t) {
          t = end
        } else if inDND(t) {
          t = (t / 60_000 + 1) * 60_000
        } else {
          free = t
          break
        }
      }
      guard let free else { return (quiet, []) }
      deliverAt = free
    }
    // 4. levels. The channel's size: member_count, else its members.
    let size = world.memberCount[channel] ?? world.members[channel]!.count
    var chat: String
    if let thread = m["thread"] as? String,
      let level = world.threadPrefs["\(user)|\(channel)|\(thread)"]
    {
      chat = level
    } else if let own = levels.lazy.compactMap({ $0?.chat }).first(where: { $0 != "default" }) {
      chat = own
    } else if let large = world.largeChannel, size > large.members {
      chat = large.level
    } else {
      chat = world.kindDefaults[kind] ?? world.defaultChat ?? "all"
    }
    let call = resolve(\.call, world.defaultCall ?? "all")
    let mentions = m["mentions"] as? [String] ?? []
    let allApplies = world.mentionAllMax.map { size <= $0 } ?? true
    let mentioned =
      (mentions.contains(user) || m["reply_to"] as? String == user
        || ((m["mention_all"] as? Bool ?? false) && allApplies && flag(\.mentionAll)))
      && flag(\.mention)
    var trigger: String
    switch m["kind"] as? String ?? "message" {
    case "call":
      guard call == "all" else { return ("-muted", []) }
      trigger = "call"
    case "pinned" where flag(\.pinned):
      guard chat != "none" else { return ("-muted", []) }
      trigger = "pinned"
    default:
      switch chat {
      case "all": trigger = mentioned ? "mention" : "message"
      case "mentions":
        guard mentioned else { return ("-not_mentioned", []) }
        trigger = "mention"
      default: return ("-muted", [])
      }
    }
    // 5. active: presence at ts, calls exempt.
    let action = world.presenceAction ?? "ignore"
    if action != "ignore" && !isCall
      && world.presence.contains(where: { $0.user == user && $0.from <= ts && ts < $0.until })
    {
      if action == "suppress" { return ("-active", []) }
      deliverAt = max(deliverAt, ts + (world.presenceDelay ?? 120_000))
    }
    if deliverAt > ts { trigger += "@\(deliverAt)" }
    // 6, 7. devices and the gateway gate
    let devices = world.devices.filter { $0.user == user }.sorted { $0.id < $1.id }
    if devices.isEmpty { return ("-no_device", []) }
    let category = m["category"] as? String
    let passing = devices.filter { d in
      if let c = category, world.mandatoryGateways.contains(c + "|" + d.gateway) { return true }
      if world.restricted.contains(user + "|" + d.gateway) { return false }
      guard let c = category else { return true }
      let info = world.categories.first { $0.name == c }!
      let pref =
        info.mandatory ? "opt_in" : (world.categoryPrefs[user + "|" + c + "|"] ?? info.defaultPref)
      if pref == "opt_out" { return false }
      return world.categoryPrefs[user + "|" + c + "|" + d.gateway] != "opt_out"
    }
    return passing.isEmpty ? ("-opted_out", []) : (trigger, passing)
  }
}
