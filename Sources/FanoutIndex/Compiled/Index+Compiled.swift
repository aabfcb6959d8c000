import FanoutModel
import FanoutTime

/// The index's columns in a compiled index file, in one fixed order: what
/// `write(to:)` writes, `init(reading:zone:)` reads back. A column added to
/// `Index` is added to both, and `IndexFile.formatVersion` goes up.
extension Index {
  package func write(to file: inout IndexFileWriter) throws(SystemCallError) {
    try file.write(users)
    try file.write(userJSON)
    try file.write(userZone)
    try file.write(userDND)
    try file.write(userDevices)
    try file.write(userCategoryPrefs)
    try file.write(deviceIDs)
    try file.write(deviceGateway)
    try file.write(deviceRestricted.map { $0 ? UInt8(1) : 0 } as [UInt8])
    try file.write(deviceJSON)
    try file.write(channels)
    try file.write(channelScope.map(\.rawValue))
    try file.write(channelMembers)
    try file.write(memberUser)
    try file.write(memberSettings)
    try file.write(memberSnooze)
    try file.write(snoozeGroups)
    try file.write(snoozeBounds)
    try file.write(dndWords)
    // Zones by name: the reader takes them from the machine's tz database,
    // as a load from the snapshot would.
    try file.write(Int64(zones.count))
    for zone in zones { try file.write(zone.name) }
    try file.write(gateways)
    try file.write(gatewayJSON)
    try file.write(categories)
    try file.write(categoryMandatory.map { $0 ? UInt8(1) : 0 })
    try file.write(categoryDefault.map(\.rawValue))
    try file.write(categoryGatewayMandatory.map { $0 ? UInt8(1) : 0 })
    try file.write(categoryPrefCategory)
    try file.write(categoryPrefGateway)
    try file.write(categoryPref.map(\.rawValue))
    try settings.write(to: &file)
    try file.write(declaredMemberCount)
    try file.write(mutedBy.offsets)
    try file.write(mutedBy.muters)
    try file.write(threadPrefs.threads)
    try file.write(threadPrefs.keys)
    try file.write(threadPrefs.starts)
    try file.write(threadPrefs.users)
    try file.write(threadPrefs.levels.map(\.rawValue))
    try file.write(presence.starts)
    try file.write(presence.bounds)
    try file.write(userQuietActions.map { $0.map { $0 == .drop ? UInt8(1) : 2 } ?? 0 })
  }

  /// Reads an index written by `write(to:)`; `zone` gives a time zone by
  /// name (nil when the machine no longer has it: the file is then unusable).
  package convenience init(
    reading file: inout IndexFileReader, zone: (String) -> ZoneTable?
  ) throws(IndexFileError) {
    let users = try file.readTable()
    let userJSON = try file.readPool()
    let userZone: Column<UInt16> = try file.column()
    let userDND: Column<Int32> = try file.column()
    let userDevices: Column<Int32> = try file.column()
    let userCategoryPrefs: Column<Int32> = try file.column()
    let deviceIDs: Column<Int64> = try file.column()
    let deviceGateway: Column<UInt16> = try file.column()
    let deviceRestricted = Column(try file.readFlags())
    let deviceJSON = try file.readPool()
    let channels = try file.readTable()
    let channelScope = try file.read(enumOf: Scope.self)
    let channelMembers: Column<Int> = try file.column()
    let memberUser: Column<Int32> = try file.column()
    let memberSettings = try file.column(MemberSettings.self)
    let memberSnooze: Column<Int32> = try file.column()
    let snoozeGroups: Column<Int32> = try file.column()
    let snoozeBounds: Column<Int64> = try file.column()
    let dndWords: Column<UInt64> = try file.column()
    var zones: [ZoneTable] = []
    let zoneCount = try file.readInt()
    guard (0...Int64(UInt16.max) + 1).contains(zoneCount) else {
      throw IndexFileError("\(zoneCount) time zones")
    }
    for _ in 0..<zoneCount {
      let name = try file.readString()
      guard let table = zone(name) else {
        throw IndexFileError("time zone '\(name)' is not in this machine's tz database")
      }
      zones.append(table)
    }
    let gateways = try file.readTable()
    let gatewayJSON = try file.readPool()
    let categories = try file.readTable()
    let categoryMandatory = Column(try file.readFlags())
    let categoryDefault = Column(try file.read(enumOf: Preference.self))
    let categoryGatewayMandatory = Column(try file.readFlags())
    let categoryPrefCategory: Column<Int32> = try file.column()
    let categoryPrefGateway: Column<Int32> = try file.column()
    let categoryPref = Column(try file.read(enumOf: Preference.self))
    let settings = try AppSettings(reading: &file)
    let declaredMemberCount: [Int64] = try file.read()
    let mutedBy = MutedBy(offsets: try file.column(), muters: try file.column())
    let threadPrefs = ThreadPrefs(
      threads: try file.readTable(), keys: try file.column(), starts: try file.column(),
      users: try file.column(), levels: Column(try file.read(enumOf: Level.self)))
    let presence = PresenceWindows(starts: try file.column(), bounds: try file.column())
    let quietActionCodes: [UInt8] = try file.read()
    guard quietActionCodes.allSatisfy({ $0 <= 2 }) else {
      throw IndexFileError("a user's quiet action is not 0, 1 or 2")
    }
    let userQuietActions = quietActionCodes.map { [nil, .drop, .defer][Int($0)] as QuietAction? }

    // What the initializer indexes by must agree before it runs; the rest
    // is checked whole below, in every build.
    let userCount = users.count
    let shapes = [
      userJSON.count == userCount, userZone.count == userCount, userDND.count == userCount,
      userDevices.count == userCount + 1, userCategoryPrefs.count == userCount + 1,
      userQuietActions.count == userCount, presence.starts.count == userCount + 1,
      userDevices.first == 0, userDevices.last.map { Int($0) == deviceIDs.count } ?? false,
      deviceGateway.count == deviceIDs.count, deviceRestricted.count == deviceIDs.count,
      zip(userDevices, userDevices.dropFirst()).allSatisfy { $0 <= $1 },
      userZone.allSatisfy { Int($0) < zones.count },
    ]
    guard !shapes.contains(false) else {
      throw IndexFileError("the user columns do not agree in length")
    }
    self.init(
      users: users, userJSON: userJSON, userZone: userZone, userDND: userDND,
      userDevices: userDevices, userCategoryPrefs: userCategoryPrefs, deviceIDs: deviceIDs,
      deviceGateway: deviceGateway, deviceRestricted: deviceRestricted, deviceJSON: deviceJSON,
      channels: channels, channelScope: channelScope, channelMembers: channelMembers,
      memberUser: memberUser, memberSettings: memberSettings, memberSnooze: memberSnooze,
      snoozeGroups: snoozeGroups, snoozeBounds: snoozeBounds, dndWords: dndWords, zones: zones,
      gateways: gateways, gatewayJSON: gatewayJSON, categories: categories,
      categoryMandatory: categoryMandatory, categoryDefault: categoryDefault,
      categoryGatewayMandatory: categoryGatewayMandatory,
      categoryPrefCategory: categoryPrefCategory, categoryPrefGateway: categoryPrefGateway,
      categoryPref: categoryPref, settings: settings, declaredMemberCount: declaredMemberCount,
      mutedBy: mutedBy, threadPrefs: threadPrefs, presence: presence,
      userQuietActions: userQuietActions)
    let violations = invariantViolations()
    guard violations.isEmpty else {
      throw IndexFileError("damaged: " + violations.prefix(3).joined(separator: "; "))
    }
  }
}

extension AppSettings {
  /// Absent values as -1 (every integer setting is at least 0) or as an
  /// empty list.
  func write(to file: inout IndexFileWriter) throws(SystemCallError) {
    func level(_ l: Level?) -> UInt8 { l?.rawValue ?? 0xFF }
    try file.write(
      [level(defaultChatLevel), level(defaultCallLevel)] + kindChatLevel.map(level)
        + [level(largeChannel?.level)])
    try file.write([
      largeChannel?.members ?? -1, mentionAllMaxMembers ?? -1, presenceDelayMilliseconds ?? -1,
      throttle?.messages ?? -1, throttle?.windowMilliseconds ?? -1,
      notificationGroups == nil ? -1 : 1, notificationGroups?.sizeMax ?? -1,
      notificationGroups?.countMax ?? -1,
    ])
    try file.write(presenceAction?.rawValue ?? "")
    try file.write(defaultQuietAction?.rawValue ?? "")
    // A label, even an empty one, after a 1: nil is no bytes at all.
    try file.write(shardLabel.map { [1] + Array($0.utf8) } ?? [])
  }

  init(reading file: inout IndexFileReader) throws(IndexFileError) {
    self.init()
    let levels: [UInt8] = try file.read()
    let numbers: [Int64] = try file.read()
    guard levels.count == 6, numbers.count == 8 else {
      throw IndexFileError("the settings section has the wrong shape")
    }
    func level(_ raw: UInt8) throws(IndexFileError) -> Level? {
      guard raw != 0xFF else { return nil }
      guard let l = Level(rawValue: raw) else { throw IndexFileError("\(raw) is not a level") }
      return l
    }
    func number(_ i: Int) -> Int64? { numbers[i] < 0 ? nil : numbers[i] }
    defaultChatLevel = try level(levels[0])
    defaultCallLevel = try level(levels[1])
    kindChatLevel = [try level(levels[2]), try level(levels[3]), try level(levels[4])]
    if let members = number(0), let l = try level(levels[5]) {
      largeChannel = LargeChannel(members: members, level: l)
    }
    mentionAllMaxMembers = number(1)
    presenceDelayMilliseconds = number(2)
    if let messages = number(3), let window = number(4) {
      throttle = Throttle(messages: messages, windowMilliseconds: window)
    }
    if number(5) != nil {
      notificationGroups = NotificationGroups(sizeMax: number(6), countMax: number(7))
    }
    func named<T: RawRepresentable<String>>(_: T.Type) throws(IndexFileError) -> T? {
      let name = try file.readString()
      guard !name.isEmpty else { return nil }
      guard let value = T(rawValue: name) else {
        throw IndexFileError("'\(name)' is not a \(T.self)")
      }
      return value
    }
    presenceAction = try named(PresenceAction.self)
    defaultQuietAction = try named(QuietAction.self)
    let label: [UInt8] = try file.read()
    shardLabel = label.isEmpty ? nil : String(decoding: label.dropFirst(), as: UTF8.self)
  }
}
