import FanoutIndex
import FanoutModel
import FanoutSQLite
import FanoutTime

/// The rows a snapshot loaded from SQLite was built from, kept so that a
/// what-if scenario's overlay of it (`ScenarioCopy`) can be loaded by
/// reading only the tables the overlay holds
/// (`SnapshotLoader.load(path:base:over:)`), which takes them: their
/// memory goes as soon as that load no longer needs it.
public final class SnapshotRows {
  private var load: Load?
  /// Whether more loads will be built over these rows (a sweep's
  /// variants): each then copies them, and only the tables its overlay
  /// changes are copied for real (copy on write), until the last takes them.
  public var sharedWithMore = false

  /// - Parameter index: what `load` built, whose columns an overlay's
  ///   load shares where its inputs are the same.
  init(_ load: Load, index: Index) {
    var load = load
    load.base = index
    self.load = load
  }

  /// The rows: given up by this value, unless more loads will share them.
  func take() -> Load? {
    defer { if !sharedWithMore { load = nil } }
    return load
  }
}

extension Load {
  /// The tables devices and gateways are built from: gateways are numbered
  /// by devices first, then by the others.
  static let gatewayTables: Set<String> = [
    "devices", "categories", "category_gateways", "category_prefs", "gateway_prefs",
  ]

  /// The tables an overlay holds, lower-cased.
  func overlayTables() throws(SnapshotError) -> Set<String> {
    try Self.overlayTables(connection)
  }

  /// The tables of the overlay `connection` opened, lower-cased.
  static func overlayTables(_ connection: Connection) throws(SnapshotError) -> Set<String> {
    var names: Set<String> = []
    do {
      let list = try connection.prepare("SELECT name FROM main.sqlite_master WHERE type = 'table'")
      while try list.step() { names.insert(list.text(0).lowercased()) }
    } catch {
      throw SnapshotError(reason: "not a readable SQLite database: \(error.message)", sqlite: error)
    }
    return names
  }

  /// Loads an overlay from the base's rows (this load's), reading again
  /// only the tables in `changed`, in `run()`'s order, so that a refusal is
  /// the one a whole load would report first. Nil when a whole load is
  /// needed: users, channels or categories other than the base's, by which
  /// every other table's rows were numbered. (The settings are applied to
  /// the rows at build time; only the devices' check of the gateway name
  /// `updates` depends on them, so turning groups on reads them again.)
  mutating func rerun(changed: Set<String>) throws(SnapshotError) -> Snapshot? {
    let schemaTables = Set(SnapshotSchema.tables.map(\.name))
    var changed = changed.intersection(schemaTables).intersection(present)
    let main = connection
    let (settingsBefore, userPrefsBefore) = (settings, userPrefs)
    if changed.contains("settings") {
      let groupsBefore = settings.notificationGroups != nil
      let (settings, rows) = try SettingsTable.read(main)
      self.settings = settings
      count("settings", rows)
      if settings.notificationGroups != nil && !groupsBefore { changed.insert("devices") }
    }
    if changed.contains("users") {
      let rows = try UserRows.read(main, tzdb: tzdb, known: users, knownZones: zones)
      guard rows.users.pool.sameStrings(as: users.pool) else { return nil }
      take(rows)
    }
    if changed.contains("dnd_weekly") {
      weekly = try WeeklyTable.read(main, users: users)
      count("dnd_weekly", weekly.count)
    }
    if changed.contains("channels") {
      let rows = try ChannelRows.read(main)
      guard rows.names.sameStrings(as: channelNames) else { return nil }
      channelScope = rows.scopes
      channelMemberCount = rows.memberCounts
      count("channels", channelScope.count)
    }
    if changed.contains("members") { try readMembers() }
    if changed.contains("channels") || changed.contains("members") {
      try ChannelRows(names: channelNames, scopes: channelScope, memberCounts: channelMemberCount)
        .checkMemberCounts(memberKeys: memberKeys)
    }
    if changed.contains("scope_prefs") { take(try ScopePrefRows.read(main, users: users)) }
    if changed.contains("channel_prefs") {
      take(
        try ChannelPrefRows.read(
          main, users: users, channels: channels, channelNames: channelNames))
    }
    if changed.contains("devices") {
      take(
        try DeviceRows.read(
          main, users: users, notificationGroups: settings.notificationGroups != nil))
    }
    if changed.contains("categories") {
      let rows = try CategoryRows.read(main)
      guard rows.categories.pool.sameStrings(as: categories.pool) else { return nil }
      take(rows)
    }
    if !changed.isDisjoint(with: Self.gatewayTables) {
      take(
        try GatewayPrefRows.read(
          main, present: present, users: users, categories: categories, gateways: deviceGateways))
    }
    try readLastTables { changed.contains($0) }
    var shared: SharedParts = []
    // The slots resolve each membership's levels down to the call default.
    if settings.sameSlotDefaults(as: settingsBefore)
      && changed.isDisjoint(with: ["members", "channels", "scope_prefs", "channel_prefs"])
      && (!changed.contains("users") || userPrefs == userPrefsBefore)
    {
      shared.insert(.slots)
    }
    if changed.isDisjoint(with: Self.gatewayTables) { shared.insert(.devices) }
    return build(over: self.base, sharing: shared)
  }
}

extension SnapshotLoader {
  /// The tables a what-if overlay (`ScenarioCopy`) may hold for B to be
  /// made from A's index (`index(overlay:base:over:)`).
  public static let tablesOverIndex: Set<String> = [
    "settings", "users", "dnd_weekly", "members", "scope_prefs", "channel_prefs", "devices",
    "channels", "categories", "category_gateways", "category_prefs", "gateway_prefs",
    "user_mutes", "thread_prefs", "presence",
  ]

  /// A what-if overlay (`ScenarioCopy`) that holds no table of the schema
  /// but `tablesOverIndex`, loaded as `index` (its base's) with the
  /// overlay's settings and users' time zones, DND windows (daily and
  /// weekly) and quiet actions; where channels (their kinds and member
  /// counts: the channels themselves must be the base's), members, the
  /// levels' rows (users', scope_prefs, channel_prefs) or the call default
  /// changed, its membership slots built again from its members (else the
  /// base's), channel kinds and levels' rows;
  /// where the categories' defaults or mandatory flags changed, those
  /// columns (the categories themselves must be the base's); where
  /// devices, mandatory gateways, category preferences or restricted
  /// gateways changed, its gateways and the columns numbering them; its
  /// muted senders, thread levels and presence windows where those
  /// changed. Every other column is
  /// shared, no other table read but `dnd_weekly` with the users (its
  /// windows replace a daily one) and the small tables that name gateways. Nil when the overlay
  /// holds other tables, or users other than the base's, or turns
  /// notification groups on where a gateway is named `updates` (refused
  /// on devices then): such an overlay is loaded over the base's rows
  /// (`load(path:base:over:)`), or whole. A refusal is the one a whole load
  /// of the overlay would report first. `usersColumnsChanged`, when the
  /// overlay's maker knows them, are the only columns of `users` it may
  /// have changed (no row added or removed): the users' levels are then
  /// the base's without comparing the two tables. `baseRows` keeps what
  /// is read from the base for the next overlay of the same base (a
  /// sweep's Bs, loaded while the base is unchanged).
  public static func index(
    overlay path: String, base: String, over index: Index,
    usersColumnsChanged: Set<String>? = nil, baseRows: BaseRows? = nil,
    timeZones: TimeZoneDatabase = TimeZoneDatabase(),
    busyTimeoutMilliseconds: Int = defaultBusyTimeoutMilliseconds
  ) throws(SnapshotError) -> Index? {
    let readers: ConsistentReads
    do {
      readers = try ConsistentReads(
        path: path, base: base, connections: 4, busyTimeoutMilliseconds: busyTimeoutMilliseconds)
    } catch {
      throw SnapshotError.reading(path, error, waited: busyTimeoutMilliseconds)
    }
    let main = readers.main
    let schemaTables = Set(SnapshotSchema.tables.map(\.name))
    let changed = try Load.overlayTables(main).intersection(schemaTables)
    guard changed.isSubset(of: tablesOverIndex) else { return nil }
    var settings = index.settings
    // Whether the slots' settings are built again: the levels' rows or
    // the call default they fall back to changed.
    // (A channel's kind places its members' scope preferences.)
    var levelsChanged = !changed.isDisjoint(with: [
      "channels", "members", "scope_prefs", "channel_prefs",
    ])
    if changed.contains("settings") {
      settings = try SettingsTable.read(main).0
      if !settings.sameSlotDefaults(as: index.settings) { levelsChanged = true }
      let groupsTurnedOn =
        settings.notificationGroups != nil && index.settings.notificationGroups == nil
      if groupsTurnedOn && index.gateways.find("updates") != nil { return nil }
    }
    var userTimes: Index.UserTimes? = nil
    var rows: UserRows? = nil
    if !changed.isDisjoint(with: ["users", "dnd_weekly"]) {
      // The users (the overlay's, else the base's) are read in two halves
      // side by side, while another connection compares the overlay's
      // levels with the base's — unless its SQL set no column they are
      // read from.
      let levelsKept =
        usersColumnsChanged.map { $0.isDisjoint(with: Self.userLevelColumns) } ?? false
      let levels =
        changed.contains("users") && !levelsKept
        ? TableRead(readers.take()) { connection throws(SnapshotError) in
          try sameLevels(connection)
        } : nil
      // Levels that are A's and build nothing again are not read at all.
      let read = Result { () throws(SnapshotError) in
        try UserRows.read(
          main, aside: readers.take, tzdb: timeZones, known: index.users,
          knownZones: index.zones, timesOnly: levelsKept && !levelsChanged)
      }
      if let levels, try !levels.result() { levelsChanged = true }
      let users = try read.get()
      guard users.users.pool.sameStrings(as: index.users.pool) else { return nil }
      let weekly: [(user: Int32, weekday: Int, start: Int, end: Int)]
      if changed.contains("dnd_weekly") {
        weekly = try WeeklyTable.read(main, users: index.users)
      } else if let kept = baseRows?.weekly {
        weekly = kept
      } else {
        weekly =
          try hasBaseTable(main, "dnd_weekly") ? try WeeklyTable.read(main, users: index.users) : []
        baseRows?.weekly = weekly
      }
      let dnd = DNDPattern.schedules(
        users: users.users.count, daily: users.dailyDND, weekly: weekly)
      userTimes = Index.UserTimes(
        zones: users.zones, userZone: Column(users.zone), userDND: Column(dnd.userDND),
        dndWords: Column(dnd.words), userQuietActions: users.quietActions)
      rows = users
    }
    // The overlay's channels: A's, each with its kind and member_count.
    var channels: ChannelRows? = nil
    if changed.contains("channels") {
      let rows = try ChannelRows.read(main)
      guard rows.names.sameStrings(as: index.channels.pool) else { return nil }
      channels = rows
    }
    var slots: Index.Slots? = nil
    if levelsChanged {
      // The base's users where the overlay has none (valid: A was loaded),
      // read on another core while this one reads the members and levels.
      let baseUsers =
        rows != nil
        ? nil
        : TableRead(readers.take()) { connection throws(SnapshotError) in
          try UserRows.read(
            connection, tzdb: timeZones, known: index.users, knownZones: index.zones
          ).prefs
        }
      slots = try membershipSlots(
        over: index, channels: channels, settings, changed, main, aside: readers.take
      ) { () throws(SnapshotError) in
        if let rows { return rows.prefs }
        return try baseUsers!.result()
      }
    }
    return try replacing(
      index, settings: settings, userTimes: userTimes, slots: slots,
      channels: channels.map {
        Index.ChannelColumns(scope: $0.scopes, declaredMemberCount: $0.memberCounts)
      }, changed, main)
  }

  /// The membership slots of the overlay's members (else `index`'s, whose
  /// columns they then share) in its `channels` (else `index`'s kinds and
  /// member counts, which the members are checked against) under its levels' rows (the users'
  /// `userPrefs`, then scope_prefs and channel_prefs, each the overlay's or
  /// else the base's) and call default; read in a whole load's order,
  /// members first (on two connections, the second `aside`).
  private static func membershipSlots(
    over index: Index, channels: ChannelRows?, _ settings: AppSettings, _ changed: Set<String>,
    _ main: Connection, aside: () -> HandedConnection,
    userPrefs: () throws(SnapshotError) -> [LevelRow]
  ) throws(SnapshotError) -> Index.Slots {
    var read: (members: [UInt64]?, scope: ScopePrefRows?, channel: ChannelPrefRows) = (
      nil, nil, ChannelPrefRows()
    )
    // The channels (the overlay's, else A's) the members are checked against.
    let channels =
      channels
      ?? ChannelRows(
        names: index.channels.pool, scopes: index.channelScope,
        memberCounts: index.declaredMemberCount)
    var memberKeys: [UInt64] = []
    do {
      if changed.contains("members") {
        let keys = try MemberRange.readAll(
          main, aside: aside, users: index.users, channelNames: index.channels.pool)
        try channels.checkMemberCounts(memberKeys: keys)
        read.members = keys
      } else {
        memberKeys = Self.memberKeys(of: index)
        if changed.contains("channels") { try channels.checkMemberCounts(memberKeys: memberKeys) }
      }
      read.scope =
        try hasTable("scope_prefs", changed, main)
        ? ScopePrefRows.read(main, users: index.users) : nil
      if try hasTable("channel_prefs", changed, main) {
        read.channel = try ChannelPrefRows.read(
          main, users: index.users, channels: index.channels, channelNames: index.channels.pool)
      }
    } catch {
      _ = try? userPrefs()  // the users are read to the end before the refusal
      throw error
    }
    if let keys = read.members { memberKeys = keys }
    var built = MembershipSlots(
      MembershipSlots.Rows(
        memberKeys: memberKeys, channelScope: channels.scopes, userPrefs: try userPrefs(),
        scopeRow: read.scope?.rowOf ?? Array(repeating: -1, count: index.users.count * 3),
        scopePrefs: read.scope?.prefs ?? [], channelPrefKeys: read.channel.keys,
        channelPrefs: read.channel.prefs, defaultCall: settings.defaultCallLevel ?? .all))
    var slots = built.columns()
    if read.members == nil {
      (slots.channelMembers, slots.memberUser) = (index.channelMembers, index.memberUser)
    }
    return slots
  }

  /// `index`'s memberships as `channel << 32 | user` keys, in slot order.
  private static func memberKeys(of index: Index) -> [UInt64] {
    var keys: [UInt64] = []
    keys.reserveCapacity(index.memberCount)
    for c in 0..<index.channels.count {
      for slot in index.channelMembers[c]..<index.channelMembers[c + 1] {
        keys.append(UInt64(c) << 32 | UInt64(UInt32(bitPattern: index.memberUser[slot])))
      }
    }
    return keys
  }

  /// `index` with `settings`, `userTimes`, `slots`, `channels`; where the overlay
  /// wrote `categories`, their columns (nil when it named other
  /// categories: a whole load numbers every other table's rows by them);
  /// where it wrote `devices` or a table after `categories`, its gateways
  /// and the columns numbering them (`gatewaysAndDevices`); and where it
  /// wrote `user_mutes`, `thread_prefs` or `presence`, theirs. Each table
  /// is read in a whole load's order, so that a refusal is the one it
  /// would report first.
  private static func replacing(
    _ index: Index, settings: AppSettings, userTimes: Index.UserTimes?,
    slots: Index.Slots?, channels: Index.ChannelColumns?, _ changed: Set<String>,
    _ main: Connection
  ) throws(SnapshotError) -> Index? {
    let deviceRows =
      changed.contains("devices")
      ? try DeviceRows.read(
        main, users: index.users, notificationGroups: settings.notificationGroups != nil)
      : nil
    var categories: Index.CategoryColumns? = nil
    if changed.contains("categories") {
      let rows = try CategoryRows.read(main)
      guard rows.categories.pool.sameStrings(as: index.categories.pool) else { return nil }
      categories = Index.CategoryColumns(
        mandatory: Column(rows.mandatory), defaults: Column(rows.defaults))
    }
    var gateways: Index.GatewayColumns? = nil
    var devices: Index.DeviceColumns? = nil
    if !changed.isDisjoint(with: [
      "devices", "category_gateways", "category_prefs", "gateway_prefs",
    ]) {
      (gateways, devices) = try gatewaysAndDevices(
        over: index, deviceRows: deviceRows, changed, main)
    }
    let users = index.users
    let mutedBy =
      changed.contains("user_mutes")
      ? MutedBy(users: users.count, mutes: try UserMutesTable.read(main, users: users)) : nil
    var threadPrefs: ThreadPrefs? = nil
    if changed.contains("thread_prefs") {
      let rows = try ThreadPrefRows.read(main, users: users, channels: index.channels)
      threadPrefs = ThreadPrefs(threads: rows.threads, rows: rows.rows)
    }
    let presence =
      changed.contains("presence")
      ? PresenceWindows(users: users.count, rows: try PresenceTable.read(main, users: users))
      : nil
    return index.replacing(
      settings: settings, userTimes: userTimes, gateways: gateways, devices: devices, slots: slots,
      categoryColumns: categories, mutedBy: mutedBy, threadPrefs: threadPrefs, presence: presence,
      channelColumns: channels)
  }

  /// B's gateways and devices: B's gateways are those its devices (A's,
  /// or the overlay's `deviceRows`) and the three tables after
  /// `categories` name (the overlay's or the base's, small, read whole in
  /// schema order), numbered as a whole load numbers them, and its
  /// devices placed under them.
  private static func gatewaysAndDevices(
    over index: Index, deviceRows: DeviceRows?, _ changed: Set<String>, _ main: Connection
  ) throws(SnapshotError) -> (Index.GatewayColumns, Index.DeviceColumns) {
    // The gateways the devices use, in the order a whole load meets them;
    // with A's devices, A's gateways that have any (`seenOfRow`: each
    // index row's number there).
    var seen = deviceRows?.gateways ?? StringTable()
    var seenOfRow = [Int32](repeating: -1, count: index.gateways.count)
    if deviceRows == nil {
      for g in index.deviceGateway where seenOfRow[Int(g)] < 0 {
        seenOfRow[Int(g)] = Int32(seen.count)
        index.gateways.pool.withBytes(Int(g)) { _ = seen.insert($0) }
      }
    }
    var present: Set<String> = []
    for table in ["category_gateways", "category_prefs", "gateway_prefs"]
    where try hasTable(table, changed, main) {
      present.insert(table)
    }
    let rows = try GatewayPrefRows.read(
      main, present: present, users: index.users, categories: index.categories, gateways: seen)
    let (gateways, renumber) = Load.gatewayColumns(
      seen: rows.gateways, categories: index.categories.count, users: index.users.count,
      categoryGateways: rows.mandatory, categoryPrefs: rows.categoryPrefs)
    var devices = index.devices
    if let deviceRows {
      devices =
        Load.deviceColumns(
          deviceRows.devices, tokens: deviceRows.tokens, restricted: rows.restricted,
          gatewayRenumber: renumber, gateways: gateways.gateways.count, users: index.users.count,
          userJSON: index.userJSON
        ).0
    } else {
      // A's devices, under B's gateway rows and restrictions.
      var gatewayOf = [UInt16](repeating: 0, count: index.deviceCount)
      var restricted = [Bool](repeating: false, count: index.deviceCount)
      for u in 0..<index.users.count {
        for d in Int(index.userDevices[u])..<Int(index.userDevices[u + 1]) {
          let s = seenOfRow[Int(index.deviceGateway[d])]
          gatewayOf[d] = UInt16(renumber[Int(s)])
          restricted[d] = rows.restricted.contains(
            GatewayPrefRows.restrictionKey(user: Int32(u), gateway: s))
        }
      }
      devices.deviceGateway = Column(gatewayOf)
      devices.deviceRestricted = Column(restricted)
    }
    return (gateways, devices)
  }

  /// The columns of `users` its rows' levels are read from, with the keys
  /// that place them (lower-cased; the rowid's names too, as `sameLevels`
  /// pairs rows by rowid).
  static let userLevelColumns = Set(
    (["user_id", "mention_all_notifications", "rowid", "oid", "_rowid_"]
      + SnapshotSchema.levelColumns).map { $0.lowercased() })

  /// Whether every row of the overlay's `users` is the base's row of the
  /// same rowid in id and levels (SQL's `IS`: a value of another type
  /// counts as a change), so that the membership slots, which resolve
  /// the levels, are the base's.
  private static func sameLevels(_ main: Connection) throws(SnapshotError) -> Bool {
    let base = Connection.baseSchema
    do {
      var columns = ["user_id"] + SnapshotSchema.levelColumns
      let optional = try main.prepare(
        "SELECT count(*) FROM pragma_table_info('users', '\(base)') "
          + "WHERE lower(name) = 'mention_all_notifications'")
      if try optional.step(), optional.int64(0) > 0 { columns.append("mention_all_notifications") }
      let same = columns.map { "a.\"\($0)\" IS b.\"\($0)\"" }.joined(separator: " AND ")
      let counts = try main.prepare(
        "SELECT (SELECT count(*) FROM main.users), (SELECT count(*) FROM \(base).users), "
          + "(SELECT count(*) FROM main.users AS b JOIN \(base).users AS a ON a.rowid = b.rowid "
          + "WHERE \(same))")
      guard try counts.step() else { return false }
      return counts.int64(0) == counts.int64(1) && counts.int64(1) == counts.int64(2)
    } catch {
      throw SnapshotError(table: "users", reason: error.message, sqlite: error)
    }
  }

  /// Whether B has table `name`: the overlay holds it (`changed`), or the base does.
  private static func hasTable(_ name: String, _ changed: Set<String>, _ main: Connection)
    throws(SnapshotError) -> Bool
  {
    if changed.contains(name) { return true }
    return try hasBaseTable(main, name)
  }

  /// Whether the base has table `name`.
  private static func hasBaseTable(_ main: Connection, _ name: String) throws(SnapshotError) -> Bool
  {
    do {
      let query = try main.prepare(
        "SELECT count(*) FROM \(Connection.baseSchema).sqlite_master "
          + "WHERE type = 'table' AND lower(name) = ?")
      query.bind(1, name)
      return try query.step() && query.int64(0) > 0
    } catch {
      throw SnapshotError(table: name, reason: error.message, sqlite: error)
    }
  }
}

/// Rows of a base read for one overlay of it, kept for the next (a what-if
/// sweep's Bs, loaded one after another while the base is unchanged):
/// its weekly DND windows, 0.1M rows at 1M users, each looked up by user.
public final class BaseRows {
  var weekly: [(user: Int32, weekday: Int, start: Int, end: Int)]?

  public init() {}
}
