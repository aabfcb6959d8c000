import FanoutModel
import FanoutSQLite

/// `settings`: the app-wide defaults and limits, key by key.
enum SettingsTable {
  static func read(_ connection: Connection) throws(SnapshotError) -> (AppSettings, rows: Int) {
    let r = try connection.reader("settings", key: [0])
    var settings = AppSettings()
    var rows = 0
    var largeMembers: Int64? = nil
    var largeLevel: Level? = nil
    var throttleMessages: Int64? = nil
    var throttleWindow: Int64? = nil
    var groupsOn = false
    var groupSizeMax: Int64? = nil
    var groupCountMax: Int64? = nil
    // Whatever the file's schema declares: a key given twice is refused, not
    // decided by row order.
    var seen: Set<String> = []
    while try r.next() {
      rows += 1
      let key = try r.text(0)
      guard seen.insert(key).inserted else { throw r.fail(nil, "duplicate key") }
      func integer(_ range: ClosedRange<Int64>) throws(SnapshotError) -> Int64 {
        let text = try r.text(1)
        guard let v = AppSettings.decimalInteger(text), range.contains(v) else {
          let bounds =
            range.upperBound == .max
            ? "at least \(range.lowerBound)" : "\(range.lowerBound)..\(range.upperBound)"
          throw r.fail(
            1,
            "\(Bounded.text(key)) \(Bounded.quoted(text)) is not a decimal integer \(bounds) (digits only, no sign or leading zeros)"
          )
        }
        return v
      }
      func oneOf<T: CaseIterable & RawRepresentable<String>>(_: T.Type) throws(SnapshotError) -> T {
        let allowed = T.allCases.map(\.rawValue).joined(separator: ", ")
        return try r.required(1, allowed, T.init(rawValue:))
      }
      switch key {
      case "schema_version":
        let version = try r.text(1)
        guard version == "1" else {
          throw r.fail(
            1, "schema_version \(Bounded.quoted(version)) is not supported (expected '1')")
        }
      case "default_chat_level":
        settings.defaultChatLevel = try r.required(
          1, "all, mentions or none", Level.init(chatLevel:))
      case "default_call_level":
        settings.defaultCallLevel = try r.required(1, "all or none", Level.init(callLevel:))
      case "default_chat_level.direct", "default_chat_level.group", "default_chat_level.broadcast":
        let scope = Scope(name: String(key.dropFirst("default_chat_level.".count)))!
        settings.kindChatLevel[Int(scope.rawValue)] = try r.required(
          1, "all, mentions or none", Level.init(chatLevel:))
      case "large_channel_members": largeMembers = try integer(1...Int64.max)
      case "large_channel_level":
        largeLevel = try r.required(1, "mentions or none") {
          $0 == "all" ? nil : Level(chatLevel: $0)
        }
      case "mention_all_max_members": settings.mentionAllMaxMembers = try integer(1...Int64.max)
      case "presence_action": settings.presenceAction = try oneOf(PresenceAction.self)
      case "presence_delay_ms": settings.presenceDelayMilliseconds = try integer(0...604_800_000)
      case "default_quiet_action": settings.defaultQuietAction = try oneOf(QuietAction.self)
      case "throttle_messages": throttleMessages = try integer(1...Int64.max)
      case "throttle_window_ms": throttleWindow = try integer(1...Int64.max)
      case "notification_groups":
        groupsOn = try r.required(1, "off or on") { $0 == "on" ? true : $0 == "off" ? false : nil }
      case "notification_group_size_max": groupSizeMax = try integer(1...Int64.max)
      case "notification_group_count_max": groupCountMax = try integer(1...Int64.max)
      case ShardLabel.settingsKey:
        settings.shardLabel = r.textIfAny(1)
      default:
        break  // unknown keys are ignored
      }
    }
    func together(_ a: String, _ aSet: Bool, _ b: String, _ bSet: Bool) throws(SnapshotError) {
      guard aSet != bSet else { return }
      let (present, missing) = aSet ? (a, b) : (b, a)
      throw SnapshotError(
        table: "settings", key: "key=\(Bounded.quoted(present))", column: "value",
        reason: "\(present) is set but \(missing) is missing (the two come together)")
    }
    try together(
      "large_channel_members", largeMembers != nil, "large_channel_level", largeLevel != nil)
    try together(
      "throttle_messages", throttleMessages != nil, "throttle_window_ms", throttleWindow != nil)
    for (key, value) in [
      ("notification_group_size_max", groupSizeMax),
      ("notification_group_count_max", groupCountMax),
    ] where value != nil && !groupsOn {
      throw SnapshotError(
        table: "settings", key: "key=\(Bounded.quoted(key))", column: "notification_groups",
        reason: "\(key) is set but notification_groups is not 'on' (a cap needs the groups)")
    }
    if groupsOn {
      settings.notificationGroups = .init(sizeMax: groupSizeMax, countMax: groupCountMax)
    }
    if let largeMembers, let largeLevel {
      settings.largeChannel = .init(members: largeMembers, level: largeLevel)
    }
    if let throttleMessages, let throttleWindow {
      settings.throttle = .init(messages: throttleMessages, windowMilliseconds: throttleWindow)
    }
    return (settings, rows)
  }
}
