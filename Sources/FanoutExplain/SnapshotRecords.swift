import Dispatch
import FanoutIndex
import FanoutModel
import FanoutSQLite
import FanoutSnapshot

public struct DeviceRecord: Sendable, Equatable {
  public var id: Int64
  public var gateway: String
  public var token: String
}

public struct CategoryPreferenceRecord: Sendable, Equatable {
  public var category: String
  /// nil: the whole category.
  public var gateway: String?
  public var preference: Preference
}

public struct CategoryRecord: Sendable, Equatable {
  public var name: String
  public var defaultPreference: Preference
  public var mandatory: Bool
  /// Gateways marked mandatory in the category (category_gateways), sorted.
  public var mandatoryGateways: [String]
}

/// Everything one user has set, row by row, as the snapshot stores it.
public struct UserRecords: Sendable {
  public var userID: String
  /// users.timezone, or 'UTC' when NULL.
  public var timeZone: String
  public var user: LevelSettings
  public var dailyDND: DailyWindow?
  /// Sorted by weekday, then start.
  public var weeklyDND: [WeeklyWindow]
  /// scope_prefs rows, indexed by `Scope.rawValue`.
  public var scopes: [LevelSettings?]
  /// channel_prefs rows by channel id, in byte order.
  public var channels: [(channel: String, settings: LevelSettings)]
  /// By device_id.
  public var devices: [DeviceRecord]
  /// Sorted by category, whole-category row first.
  public var categoryPreferences: [CategoryPreferenceRecord]
  /// Gateways the user is restricted on (gateway_prefs.restricted = 1), sorted.
  public var restrictedGateways: [String]
  /// Contract v2: users.quiet_action ('drop', 'defer' or nil).
  public var quietAction: QuietAction? = nil
  /// Contract v2: presence windows `[from, until)` as stored, by from.
  public var presence: [(from: Int64, until: Int64)] = []
  /// Contract v2: the users this user muted (user_mutes), sorted.
  public var mutedUsers: [String] = []
  /// Contract v2: thread_prefs rows, by channel then thread.
  public var threadLevels: [(channel: String, thread: String, level: Level)] = []

  /// The user's thread_prefs level for `thread` of `channel`, if any.
  public func threadLevel(channel: String, thread: String) -> Level? {
    threadLevels.first { $0.channel == channel && $0.thread == thread }?.level
  }

  public func channelSettings(_ channel: String) -> LevelSettings? {
    channels.first { $0.channel == channel }?.settings
  }
}

/// Reads single rows of a snapshot by key, for the tools that look at one
/// user at a time (`fanout explain`, `fanout prefs get`). Validate the file
/// with `SnapshotLoader.load` first: these reads check types, not references.
public final class SnapshotRecords {
  private let connection: Connection
  private var present: Set<String> = []

  public init(path: String) throws(SnapshotError) {
    try SnapshotError.checkFile(path)
    do {
      connection = try Connection(path: path)
      // One read transaction for the reader's life: every row read comes
      // from the same committed state.
      connection.waitWhenBusy(milliseconds: SnapshotLoader.defaultBusyTimeoutMilliseconds)
      try connection.beginRead()
      let list = try connection.prepare(
        "SELECT lower(name) FROM sqlite_master WHERE type IN ('table', 'view')")
      while try list.step() { present.insert(list.text(0)) }
    } catch {
      throw SnapshotError.opening(path, error)
    }
  }

  /// Opens `path` and reads `user`'s rows on another thread, while the
  /// caller loads the index; `wait(index:)` adds their devices, read by the
  /// ids the index lists, and hands both over.
  static func reading(_ path: String, user: String) -> PendingUserRecords {
    PendingUserRecords(path: path, user: user)
  }

  /// The channel's kind, or nil when there is no such channel.
  public func channelScope(_ channel: String) throws(SnapshotError) -> Scope? {
    var scope: Scope? = nil
    try forEachRow("channels", key: [0], where: "channel_id = ?", [channel]) {
      (row) throws(SnapshotError) in
      scope = Scope(name: try row.text(1))
    }
    return scope
  }

  public func category(_ name: String) throws(SnapshotError) -> CategoryRecord? {
    var record: CategoryRecord? = nil
    try forEachRow("categories", key: [0], where: "category = ?", [name]) {
      (row) throws(SnapshotError) in
      record = CategoryRecord(
        name: name, defaultPreference: Preference(name: try row.text(1)) ?? .optIn,
        mandatory: try row.flag(2), mandatoryGateways: [])
    }
    guard var record else { return nil }
    try forEachRow(
      "category_gateways", key: [0, 1], where: "category = ? AND mandatory = 1", [name],
      orderBy: "gateway COLLATE BINARY"
    ) { (row) throws(SnapshotError) in
      record.mandatoryGateways.append(try row.text(1))
    }
    return record
  }

  /// The user's rows, devices read by the ids `index` lists for them, or
  /// nil when there is no such user.
  public func user(_ id: String, in index: Index) throws(SnapshotError) -> UserRecords? {
    guard var records = try user(id) else { return nil }
    records.devices = try devices(of: id, in: index)
    return records
  }

  /// The user's device rows, each read by its key: `devices` has no index
  /// by user, and scanning it (29,021 page reads at 1M users) took CPU from
  /// the index load beside it. A row the index lists but the file no
  /// longer holds for this user is left out: the explanation then says the
  /// two disagree.
  func devices(of id: String, in index: Index) throws(SnapshotError) -> [DeviceRecord] {
    guard let u = index.users.find(id).map(Int.init) else { return [] }
    var devices: [DeviceRecord] = []
    for k in Int(index.userDevices[u])..<Int(index.userDevices[u + 1]) {
      try forEachRow(
        "devices", key: [0], where: "device_id = CAST(? AS INTEGER) AND user_id = ?",
        [String(index.deviceIDs[k]), id]
      ) { (row) throws(SnapshotError) in
        devices.append(
          DeviceRecord(id: try row.int(0), gateway: try row.text(2), token: try row.text(3)))
      }
    }
    return devices
  }

  /// The user's rows but their devices (`user(_:in:)` reads those), or nil
  /// when there is no such user.
  func user(_ id: String) throws(SnapshotError) -> UserRecords? {
    var found: UserRecords? = nil
    try forEachRow("users", key: [0], where: "user_id = ?", [id]) { (row) throws(SnapshotError) in
      let daily: DailyWindow?
      if let start = try row.optionalMinute(9), let end = try row.optionalMinute(10) {
        daily = DailyWindow(start: start, end: end)
      } else {
        daily = nil
      }
      found = UserRecords(
        userID: id, timeZone: try row.optionalText(8) ?? "UTC",
        user: try LevelSettings(row, first: 1),
        dailyDND: daily, weeklyDND: [], scopes: [nil, nil, nil], channels: [], devices: [],
        categoryPreferences: [], restrictedGateways: [],
        quietAction: try row.optionalText(12).flatMap(QuietAction.init(rawValue:)))
    }
    guard var records = found else { return nil }
    let byUser = "user_id = ?"
    try forEachRow(
      "dnd_weekly", key: [0, 1, 2], where: byUser, [id], orderBy: "weekday, start_min, end_min"
    ) { (row) throws(SnapshotError) in
      records.weeklyDND.append(
        WeeklyWindow(weekday: Int(try row.int(1)), start: try row.minute(2), end: try row.minute(3))
      )
    }
    try forEachRow("scope_prefs", key: [0, 1], where: byUser, [id]) { (row) throws(SnapshotError) in
      if let scope = Scope(name: try row.text(1)) {
        records.scopes[Int(scope.rawValue)] = try LevelSettings(row, first: 2)
      }
    }
    try forEachRow(
      "channel_prefs", key: [0, 1], where: byUser, [id], orderBy: "channel_id COLLATE BINARY"
    ) { (row) throws(SnapshotError) in
      records.channels.append(
        (try row.text(1), try LevelSettings(row, first: 2, acceptDefault: true)))
    }
    try forEachRow(
      "category_prefs", key: [0, 1, 2], where: byUser, [id],
      orderBy: "category COLLATE BINARY, gateway IS NOT NULL, gateway COLLATE BINARY"
    ) { (row) throws(SnapshotError) in
      records.categoryPreferences.append(
        CategoryPreferenceRecord(
          category: try row.text(1), gateway: try row.optionalText(2),
          preference: Preference(name: try row.text(3)) ?? .optIn))
    }
    try forEachRow(
      "gateway_prefs", key: [0, 1], where: byUser + " AND restricted = 1", [id],
      orderBy: "gateway COLLATE BINARY"
    ) { (row) throws(SnapshotError) in
      records.restrictedGateways.append(try row.text(1))
    }
    try forEachRow(
      "presence", key: [0, 1, 2], where: byUser, [id], orderBy: "active_from, active_until"
    ) { (row) throws(SnapshotError) in
      records.presence.append((try row.int(1), try row.int(2)))
    }
    try forEachRow(
      "user_mutes", key: [0, 1], where: byUser, [id], orderBy: "muted_user_id COLLATE BINARY"
    ) { (row) throws(SnapshotError) in
      records.mutedUsers.append(try row.text(1))
    }
    try forEachRow(
      "thread_prefs", key: [0, 1, 2], where: byUser, [id],
      orderBy: "channel_id COLLATE BINARY, thread_id COLLATE BINARY"
    ) { (row) throws(SnapshotError) in
      records.threadLevels.append(
        (try row.text(1), try row.text(2), Level(chatLevel: try row.text(3)) ?? .all))
    }
    return records
  }

  /// Calls `body` with each row of `table` matching `condition`; with none
  /// when an optional table is absent.
  private func forEachRow(
    _ table: String, key: [Int32], where condition: String, _ arguments: [String] = [],
    orderBy: String? = nil, _ body: (TableReader) throws(SnapshotError) -> Void
  ) throws(SnapshotError) {
    guard present.contains(table) else { return }
    let reader = try TableReader(
      connection, SnapshotSchema.table(table), keyColumns: key, where: condition,
      arguments: arguments, orderBy: orderBy)
    while try reader.next() { try body(reader) }
  }
}

/// A store opened, and one user's rows read, on another thread
/// (`SnapshotRecords.reading`).
///
/// `@unchecked Sendable`: `outcome` is written once, before the group is
/// left, and read only after waiting on it; the store's connection is used
/// by one thread at a time, the reader's and then the waiter's.
final class PendingUserRecords: @unchecked Sendable {
  private var outcome: Result<(SnapshotRecords, UserRecords?), SnapshotError>?
  private let group = DispatchGroup()

  private let user: String

  init(path: String, user: String) {
    self.user = user
    group.enter()
    DispatchQueue.global().async {
      self.outcome = Result { () throws(SnapshotError) in
        let store = try SnapshotRecords(path: path)
        return (store, try store.user(user))
      }
      self.group.leave()
    }
  }

  func wait(index: Index) throws(SnapshotError) -> (store: SnapshotRecords, user: UserRecords?) {
    group.wait()
    let (store, found) = try outcome!.get()
    guard var records = found else { return (store, nil) }
    records.devices = try store.devices(of: user, in: index)
    return (store, records)
  }
}
