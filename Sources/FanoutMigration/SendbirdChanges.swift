import FanoutModel
import FanoutSQLite
import FanoutSnapshot
import FoundationEssentials

/// Sendbird push preferences, one entry per SDK / Platform API call, named by
/// `method` (see docs/migration.md): push trigger options for
/// the user and per channel (`default` = inherit), the snooze period
/// [start, end), the legacy daily DND, weekly DND schedules (several windows
/// per day; they replace the daily window while set), and push tokens.
enum SendbirdChanges {
  struct Entry: Decodable {
    var method: String
    var userId: String?
    var channelUrl: String?
    var pushTriggerOption: String?
    var snoozeOn: Bool?
    var startTs: Int64?
    var endTs: Int64?
    var doNotDisturbOn: Bool?
    var startHour: Int?
    var startMin: Int?
    var endHour: Int?
    var endMin: Int?
    var timezone: String?
    var dndSchedules: [String: [Window]]?
    var tokenType: String?
    var token: String?
    var unique: Bool?
  }

  static let shape = ChangeShape.array(
    .object(
      [
        "method", "user_id", "channel_url", "push_trigger_option", "snooze_on", "start_ts",
        "end_ts",
        "do_not_disturb_on", "start_hour", "start_min", "end_hour", "end_min", "timezone",
        "dnd_schedules", "token_type", "token", "unique",
      ],
      nested: [
        "dnd_schedules": .map(.array(.object(["start_hour", "start_min", "end_hour", "end_min"])))
      ]))

  struct Window: Decodable {
    var startHour: Int
    var startMin: Int
    var endHour: Int
    var endMin: Int
  }

  static let methods = [
    "set_push_trigger_option", "set_channel_push_trigger_option", "set_snooze_period",
    "set_do_not_disturb", "set_weekly_do_not_disturb", "register_push_token",
    "unregister_push_token", "unregister_all_push_tokens",
  ]

  static func apply(_ data: Data, _ context: ApplyContext) throws(ApplyError) -> Int {
    try context.each(try ApplyContext.decode([Entry].self, data, shape: shape)) {
      (e) throws(EntryError) in
      let user = try context.user(e.userId, field: "user_id")
      func required<T>(_ value: T?, _ name: String) throws(EntryError) -> T {
        guard let value else { throw EntryError("\(e.method) needs \(name)") }
        return value
      }
      switch e.method {
      case "set_push_trigger_option":
        let option = try required(e.pushTriggerOption, "push_trigger_option")
        guard let level = triggerOption(option) else {
          throw EntryError(
            "push_trigger_option \(Bounded.quoted(option)) is not all, mention_only or off")
        }
        try context.set(.user(user), [("chat_level", .level(level))], known: "")
      case "set_channel_push_trigger_option":
        let channel = try context.channel(try required(e.channelUrl, "channel_url"))
        let option = try required(e.pushTriggerOption, "push_trigger_option")
        guard option == "default" || triggerOption(option) != nil else {
          throw EntryError(
            "push_trigger_option \(Bounded.quoted(option)) is not default, all, mention_only or off"
          )
        }
        try context.set(
          .channel(user: user, channel: channel), [("chat_level", .level(triggerOption(option)))],
          known: "")
      case "set_snooze_period":
        if try required(e.snoozeOn, "snooze_on") {
          let start = try required(e.startTs, "start_ts")
          let end = try required(e.endTs, "end_ts")
          guard start < end else {
            throw EntryError("end_ts \(end) is not after start_ts \(start)")
          }
          try context.set(.user(user), ApplyContext.snooze((start, end)), known: "")
        } else {
          try context.set(.user(user), ApplyContext.snooze(nil), known: "")
        }
      case "set_do_not_disturb":
        var columns = try timeZone(e, context)
        if try required(e.doNotDisturbOn, "do_not_disturb_on") {
          let start = try minute(e.startHour, e.startMin, "start")
          let end = try minute(e.endHour, e.endMin, "end")
          columns += [("dnd_start", .int(Int64(start))), ("dnd_end", .int(Int64(end)))]
        } else {
          columns += [("dnd_start", .null), ("dnd_end", .null)]
        }
        try context.set(.user(user), columns, known: "")
      case "set_weekly_do_not_disturb":
        var windows: [WeeklyWindow] = []
        if try required(e.doNotDisturbOn, "do_not_disturb_on") {
          for (day, list) in try required(e.dndSchedules, "dnd_schedules") {
            guard let weekday = weekday(day) else {
              throw EntryError(
                "dnd_schedules: \(Bounded.quoted(day)) is not a day name (MONDAY .. SUNDAY)")
            }
            for w in list {
              let start = try minute(w.startHour, w.startMin, "\(day) start")
              let end = try minute(w.endHour, w.endMin, "\(day) end")
              guard start < end else {
                throw EntryError(
                  "dnd_schedules \(day): a window must end after it starts (split one that crosses midnight over two days, ending the first at 23:59)"
                )
              }
              windows.append(WeeklyWindow(weekday: weekday, start: start, end: end))
            }
          }
        }
        windows.sort { ($0.weekday, $0.start, $0.end) < ($1.weekday, $1.start, $1.end) }
        let zone = try timeZone(e, context)
        if !zone.isEmpty { try context.set(.user(user), zone, known: "") }
        try context.write { (editor) throws(SQLiteError) in
          try editor.replaceWeekly(user: user, windows)
        }
      case "register_push_token":
        let gateway = try gateway(try required(e.tokenType, "token_type"), context)
        let token = try required(e.token, "token")
        try context.mayTake(gateway: gateway, token: token, for: user)
        try context.write { (editor) throws(SQLiteError) in
          try editor.registerDevice(
            user: user, gateway: gateway, token: token, unique: e.unique ?? false)
        }
      case "unregister_push_token":
        let gateway = try gateway(try required(e.tokenType, "token_type"), context)
        let token = try required(e.token, "token")
        var removed = 0
        try context.write { (editor) throws(SQLiteError) in
          removed = try editor.removeDevices(user: user, gateway: gateway, token: token)
        }
        guard removed > 0 else {
          throw EntryError(
            "user \(Bounded.quoted(user)) has no \(gateway) token \(Bounded.quoted(token))")
        }
      case "unregister_all_push_tokens":
        let gateway = try e.tokenType.map { (t) throws(EntryError) in try Self.gateway(t, context)
        }
        try context.write { (editor) throws(SQLiteError) in
          try editor.removeDevices(user: user, gateway: gateway, token: nil)
        }
      default:
        throw EntryError(
          "unknown method \(Bounded.quoted(e.method)) (expected one of \(methods.joined(separator: ", ")))"
        )
      }
    }
  }

  /// all / mention_only (mentionOnly, MENTION_ONLY) / off → the chat level.
  static func triggerOption(_ name: String) -> Level? {
    switch name.lowercased() {
    case "all": .all
    case "mention_only", "mentiononly": .mentions
    case "off": Level.none
    default: nil
    }
  }

  /// A push token type as a gateway: gcm is FCM's old name.
  static func gateway(_ tokenType: String, _ context: ApplyContext) throws(EntryError) -> String {
    try context.gateway(tokenType == "gcm" ? "fcm" : tokenType)
  }

  static func weekday(_ name: String) -> Int? {
    let days = ["monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday"]
    return days.firstIndex(of: name.lowercased()).map { $0 + 1 }
  }

  static func minute(_ hour: Int?, _ minute: Int?, _ what: String) throws(EntryError) -> Int {
    guard let hour, let minute, (0...23).contains(hour), (0...59).contains(minute) else {
      throw EntryError("\(what): needs hour 0..23 and minute 0..59")
    }
    return hour * 60 + minute
  }

  private static func timeZone(_ e: Entry, _ context: ApplyContext) throws(EntryError) -> [(
    String, ColumnValue
  )] {
    guard let zone = e.timezone else { return [] }
    return [("timezone", .text(try context.timeZone(zone)))]
  }
}
