import CSQLite
import FanoutIndex
import FanoutModel
import FanoutTime

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// What a snapshot holds, for `fanout snapshot check` and logs.
public struct SnapshotInfo: Sendable {
  /// Rows per table, for the tables present, in schema order.
  public var rowCounts: [(table: String, rows: Int)] = []
  /// The time zones users are in (NULL counts as UTC), sorted.
  public var timeZones: [String] = []
  /// Devices per gateway, sorted by gateway name.
  public var devicesPerGateway: [(gateway: String, devices: Int)] = []
  public var dndPatterns = 0
  public var snoozeGroups = 0
}

/// A loaded snapshot: the index to evaluate against and a description of it.
public struct Snapshot: Sendable {
  public let index: Index
  public let info: SnapshotInfo
}

/// Loads and validates a snapshot file; see `SnapshotSchema` for the tables.
public enum SnapshotLoader {
  /// How long a load waits for a writer that holds the snapshot locked.
  public static let defaultBusyTimeoutMilliseconds = 5_000

  /// Connections a load reads on at once: the main one, plus channels,
  /// devices, channel_prefs and the second range of members, aside.
  static let connections = 5

  /// Refuses, in plain words, a path that cannot be a snapshot: missing, a
  /// folder, unreadable or empty.
  public static func checkFile(_ path: String) throws(SnapshotError) {
    try SnapshotError.checkFile(path)
  }

  /// Loads the snapshot at `path`: a SQLite snapshot, or a file that
  /// `fanout snapshot compile --out` wrote. With a `cache`, a snapshot
  /// loaded before in the same state is read from it, and one loaded now
  /// is added to it.
  public static func load(
    path: String, timeZones: TimeZoneDatabase = TimeZoneDatabase(),
    busyTimeoutMilliseconds: Int = defaultBusyTimeoutMilliseconds, cache: IndexCache? = nil
  ) throws(SnapshotError) -> Snapshot {
    try loadNoting(
      path: path, timeZones: timeZones, busyTimeoutMilliseconds: busyTimeoutMilliseconds,
      cache: cache
    ).snapshot
  }

  /// `load`, also giving the state the snapshot was read in when it can
  /// be cached (nil without a cache, or while the file is being written).
  static func loadNoting(
    path: String, timeZones: TimeZoneDatabase, busyTimeoutMilliseconds: Int, cache: IndexCache?
  ) throws(SnapshotError) -> (snapshot: Snapshot, state: SnapshotFingerprint?) {
    try SnapshotError.checkFile(path)
    let read = try readOnce(
      path: path, timeZones: timeZones, busyTimeoutMilliseconds: busyTimeoutMilliseconds,
      cache: cache)
    // Written once the read transaction is over, so that no writer waits for it.
    if let cache, let state = read.state, !read.fromCache {
      cache.store(read.snapshot, fingerprint: state)
    }
    return (read.snapshot, read.state)
  }

  /// Reads the snapshot in one read transaction: from `cache` when it holds
  /// the state found there, else from SQLite.
  private static func readOnce(
    path: String, timeZones: TimeZoneDatabase, busyTimeoutMilliseconds: Int, cache: IndexCache?
  ) throws(SnapshotError) -> (snapshot: Snapshot, state: SnapshotFingerprint?, fromCache: Bool) {
    let readers: ConsistentReads
    do {
      readers = try ConsistentReads(
        path: path, connections: connections, busyTimeoutMilliseconds: busyTimeoutMilliseconds)
    } catch {
      // Looked at only once SQLite has found no database there (a file
      // opened and closed here would drop this process's locks on it).
      if (error.sqlite?.code ?? 0) & 0xFF == SQLITE_NOTADB, CompiledSnapshot.isCompiled(path) {
        return (try loadCompiled(path, timeZones: timeZones), nil, false)
      }
      throw error
    }
    // Inside the read transaction: the header is that of the state read.
    let state =
      cache == nil ? nil : SnapshotFingerprint(path: path, header: readers.main.fileHeader())
    if let cache, let state, let snapshot = cache.snapshot(for: state, timeZones: timeZones) {
      return (snapshot, state, true)
    }
    var load = Load(readers: readers, path: path, tzdb: timeZones)
    let snapshot = try load.run()
    // Cacheable only if nothing changed meanwhile (a commit to the WAL would).
    let unchanged =
      state != nil && SnapshotFingerprint(path: path, header: readers.main.fileHeader()) == state
    return (snapshot, unchanged ? state : nil, false)
  }

  /// Compiles the snapshot at `path` to `output` (`fanout snapshot compile
  /// --out`), or into `cache` when `output` is nil. Returns the file written.
  public static func compile(
    path: String, output: String?, cache: IndexCache?,
    timeZones: TimeZoneDatabase = TimeZoneDatabase(),
    busyTimeoutMilliseconds: Int = defaultBusyTimeoutMilliseconds
  ) throws(CompileError) -> String {
    func loaded(into cache: IndexCache?) throws(CompileError) -> (Snapshot, SnapshotFingerprint?) {
      do {
        return try loadNoting(
          path: path, timeZones: timeZones, busyTimeoutMilliseconds: busyTimeoutMilliseconds,
          cache: cache)
      } catch { throw .snapshot(error) }
    }
    if let output {
      let (snapshot, _) = try loaded(into: nil)
      do {
        try CompiledSnapshot.write(snapshot, key: SnapshotFingerprint.buildKey, to: output)
      } catch { throw .cannotWrite("'\(output)': \(error)") }
      return output
    }
    guard let cache else {
      throw .cannotWrite(
        "no index cache folder (neither XDG_CACHE_HOME nor HOME is set; use --out)")
    }
    let (snapshot, state) = try loaded(into: cache)
    guard let fingerprint = state else {
      throw .snapshot(
        SnapshotError(
          busy: path,
          reason: "it is being written (a -wal or -journal file beside it, or a change in the "
            + "last \(SnapshotFingerprint.settleSeconds) s); not cached"))
    }
    let file = cache.directory + "/" + fingerprint.fileName
    if access(file, R_OK) != 0 { cache.store(snapshot, fingerprint: fingerprint) }
    guard access(file, R_OK) == 0 else {
      throw .cannotWrite("the index cache folder '\(cache.directory)' (or too little space there)")
    }
    return file
  }

  /// Reads a compiled snapshot given in place of a SQLite one: it must come
  /// from this build of Fanout.
  static func loadCompiled(_ path: String, timeZones: TimeZoneDatabase) throws(SnapshotError)
    -> Snapshot
  {
    do throws(IndexFileError) {
      guard
        let snapshot = try CompiledSnapshot.read(
          path, timeZones: timeZones, accepts: SnapshotFingerprint.isThisBuild)
      else { throw IndexFileError("cannot open it") }
      return snapshot
    } catch {
      throw SnapshotError(reason: "compiled index '\(path)' is not usable: \(error.reason)")
    }
  }
}

/// The state of one load, table by table.
struct Load {
  let connection: Connection
  /// Where side reads get their connections: all see the main one's state.
  let readers: ConsistentReads?
  let path: String
  let tzdb: TimeZoneDatabase
  var info = SnapshotInfo()
  var present: Set<String> = []

  var settings = AppSettings()

  var users = StringTable()
  var userPrefs: [LevelRow] = []
  var userZone: [UInt16] = []
  var dailyDND: [(start: Int, end: Int)?] = []
  var zoneIDs: [String: UInt16] = [:]
  var zones: [ZoneTable] = []
  var weekly: [(user: Int32, weekday: Int, start: Int, end: Int)] = []

  var channels = StringTable()
  /// Channel ids in byte order, while `pendingChannels` hashes them on
  /// another core (members need only the names: they arrive in the same order).
  var channelNames = BytePool()
  var pendingChannels: Pending<StringTable>? = nil
  var channelScope: [Scope] = []
  /// Per channel: member_count, -1 where NULL; empty when the snapshot
  /// has no such column (v1), so that it costs nothing there.
  var channelMemberCount: [Int64] = []
  var memberKeys: [UInt64] = []  // channel << 32 | user

  var scopeRow: [Int32] = []  // user * 3 + scope -> scope_prefs row
  var scopePrefs: [LevelRow] = []
  var channelPrefKeys: [(key: UInt64, row: Int32)] = []
  var channelPrefs: [LevelRow] = []

  var categories = StringTable()
  var categoryMandatory: [Bool] = []
  var categoryDefault: [Preference] = []

  /// Gateways in order of first sight; renumbered by name at the end.
  var gatewaysSeen = StringTable()
  var devices: [(id: Int64, user: Int32, gateway: Int32)] = []
  /// Each device's token as a JSON string literal.
  var tokens = BytePool()
  var categoryGateways: [(category: Int32, gateway: Int32)] = []  // mandatory ones
  var categoryPrefRows: [(user: Int32, category: Int32, gateway: Int32, pref: Preference)] = []
  var restricted: Set<UInt64> = []  // user << 32 | gateway
  var mutes: [(user: Int32, muted: Int32)] = []
  var threadIDs = StringTable()
  var threadPrefRows: [(user: Int32, channel: Int32, thread: Int32, level: Level)] = []
  /// Per user: whether snooze and DND defer rather than drop (quiet_action,
  /// else default_quiet_action, else drop).
  var userDefers: [Bool] = []
  var presence: [(user: Int32, from: Int64, until: Int64)] = []

  init(readers: ConsistentReads, path: String, tzdb: TimeZoneDatabase) {
    self.init(connection: readers.main, readers: readers, path: path, tzdb: tzdb)
  }

  /// A side load reads on a connection taken from the main load's readers.
  init(connection: Connection, readers: ConsistentReads?, path: String, tzdb: TimeZoneDatabase) {
    self.connection = connection
    self.readers = readers
    self.path = path
    self.tzdb = tzdb
  }

  mutating func run() throws(SnapshotError) -> Snapshot {
    try checkSchema()
    if present.contains("settings") { try readSettings() }
    // Channels need nothing before them, devices only the users,
    // channel_prefs the users and the channel hash: each is read on a
    // connection of its own, on another core, alongside what the load does
    // meanwhile. Their errors are thrown where a serial load meets them.
    let channelsRead = channelsAside()
    try readInIDOrder("user_id") { load, order throws(SnapshotError) in
      try load.readUsers(orderBy: order)
    }
    let devicesRead = devicesAside()
    if present.contains("dnd_weekly") { try readWeekly() }
    take(try channelsRead.wait().get())
    let channelPrefsRead = channelPrefsAside()
    try readMembers()
    try checkMemberCounts()
    if present.contains("scope_prefs") { try readScopePrefs() }
    awaitChannels()
    take(try channelPrefsRead.wait().get())
    // Categories are read while the devices finish aside; devices come
    // first in the schema, so their error wins.
    var categoriesError: SnapshotError? = nil
    if present.contains("categories") {
      do { try readCategories() } catch { categoriesError = error }
    }
    take(try devicesRead.wait().get())
    if let categoriesError { throw categoriesError }
    if present.contains("category_gateways") { try readCategoryGateways() }
    if present.contains("category_prefs") { try readCategoryPrefs() }
    if present.contains("gateway_prefs") { try readGatewayPrefs() }
    if present.contains("user_mutes") { try readUserMutes() }
    if present.contains("thread_prefs") { try readThreadPrefs() }
    if present.contains("presence") { try readPresence() }
    return build()
  }

  /// Takes the channel table once its hashing (started after reading channels) is done.
  mutating func awaitChannels() {
    if let pending = pendingChannels {
      channels = pending.wait()
      pendingChannels = nil
    }
  }

  /// Runs `read` on a second `Load` over its own connection, on another
  /// core; `read` first gives it what it needs of this one.
  func readAside<T: Sendable>(
    _ table: String, _ read: @escaping @Sendable (inout Load) throws(SnapshotError) -> T
  ) -> Pending<Result<T, SnapshotError>> {
    let (path, tzdb) = (path, tzdb)
    let handed = readers!.take()
    return Pending {
      Result { () throws(SnapshotError) in
        var side = Load(connection: handed.connection, readers: nil, path: path, tzdb: tzdb)
        return try read(&side)
      }
    }
  }

  struct ChannelRows: Sendable {
    var names: BytePool
    var scopes: [Scope]
    var memberCounts: [Int64]
  }

  func channelsAside() -> Pending<Result<ChannelRows, SnapshotError>> {
    readAside("channels") { side throws(SnapshotError) in
      try side.readInIDOrder("channel_id") { load, order throws(SnapshotError) in
        try load.readChannels(orderBy: order)
      }
      return ChannelRows(
        names: side.channelNames, scopes: side.channelScope, memberCounts: side.channelMemberCount)
    }
  }

  /// Takes the channels and starts hashing their ids on another core
  /// (members need only the names: they arrive in the same order).
  mutating func take(_ rows: ChannelRows) {
    channelNames = rows.names
    channelScope = rows.scopes
    channelMemberCount = rows.memberCounts
    count("channels", channelNames.count)
    pendingChannels = Pending { [channelNames] in StringTable(indexing: channelNames) }
  }

  /// What reading the devices table gives; the first table to name gateways.
  struct DeviceRows: Sendable {
    var devices: [(id: Int64, user: Int32, gateway: Int32)]
    var tokens: BytePool
    var gateways: StringTable
  }

  func devicesAside() -> Pending<Result<DeviceRows, SnapshotError>> {
    readAside("devices") { [users] side throws(SnapshotError) in
      side.users = users
      try side.readDevices()
      return DeviceRows(devices: side.devices, tokens: side.tokens, gateways: side.gatewaysSeen)
    }
  }

  mutating func take(_ rows: DeviceRows) {
    devices = rows.devices
    tokens = rows.tokens
    gatewaysSeen = rows.gateways
    count("devices", devices.count)
  }

  struct ChannelPrefRows: Sendable {
    var keys: [(key: UInt64, row: Int32)]
    var prefs: [LevelRow]
  }

  /// Call after taking the channels: the reader waits for the channel hash itself.
  func channelPrefsAside() -> Pending<Result<ChannelPrefRows, SnapshotError>> {
    guard let channelHash = pendingChannels else {
      preconditionFailure("channelPrefsAside before the channels were taken")
    }
    return readAside("channel_prefs") { [users, channelNames] side throws(SnapshotError) in
      side.users = users
      side.channelNames = channelNames
      side.channels = channelHash.wait()
      try side.readChannelPrefs()
      return ChannelPrefRows(keys: side.channelPrefKeys, prefs: side.channelPrefs)
    }
  }

  mutating func take(_ rows: ChannelPrefRows) {
    channelPrefKeys = rows.keys
    channelPrefs = rows.prefs
    count("channel_prefs", channelPrefs.count)
  }

  // MARK: Schema

  mutating func checkSchema() throws(SnapshotError) {
    var names: [String: String] = [:]  // lower-cased -> as declared
    do {
      let list = try connection.prepare(
        "SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")
      while try list.step() { names[list.text(0).lowercased()] = list.text(0) }
    } catch {
      throw SnapshotError(reason: "not a readable SQLite database: \(error.message)", sqlite: error)
    }
    for table in SnapshotSchema.tables {
      guard let declared = names[table.name] else {
        if table.required { throw SnapshotError(table: table.name, reason: "missing table") }
        continue
      }
      present.insert(table.name)
      var columns: Set<String> = []
      do {
        let pragma = try connection.prepare("SELECT name FROM pragma_table_info('\(declared)')")
        while try pragma.step() { columns.insert(pragma.text(0).lowercased()) }
      } catch {
        throw SnapshotError(table: table.name, reason: error.message, sqlite: error)
      }
      for column in table.columns where !columns.contains(column) {
        throw SnapshotError(table: table.name, column: column, reason: "missing column")
      }
    }
  }

  mutating func reader(_ table: String, key: [Int32], orderBy: String? = nil) throws(SnapshotError)
    -> TableReader
  {
    try TableReader(connection, SnapshotSchema.table(table), keyColumns: key, orderBy: orderBy)
  }

  mutating func count(_ table: String, _ rows: Int) { info.rowCounts.append((table, rows)) }

  // MARK: Lookups that name the missing entity

  func user(_ r: TableReader, _ c: Int32) throws(SnapshotError) -> Int32 {
    guard let row = users.find(try r.textBytes(c)) else {
      throw r.fail(c, "unknown user '\(try r.text(c))'")
    }
    return row
  }

  func category(_ r: TableReader, _ c: Int32) throws(SnapshotError) -> Int32 {
    guard let row = categories.find(try r.textBytes(c)) else {
      throw r.fail(c, "unknown category '\(try r.text(c))'")
    }
    return row
  }

  mutating func gateway(_ r: TableReader, _ c: Int32) throws(SnapshotError) -> Int32 {
    let bytes = try r.textBytes(c)
    return gatewaysSeen.find(bytes) ?? gatewaysSeen.insert(bytes)!
  }

  func required<T>(_ r: TableReader, _ c: Int32, _ allowed: String, _ parse: (String) -> T?)
    throws(SnapshotError)
    -> T
  {
    guard let v = try r.enumerated(c, allowed, parse) else { throw r.nullError(c) }
    return v
  }

  // MARK: Tables

  mutating func readSettings() throws(SnapshotError) {
    let r = try reader("settings", key: [0])
    var rows = 0
    var largeMembers: Int64? = nil
    var largeLevel: Level? = nil
    var throttleMessages: Int64? = nil
    var throttleWindow: Int64? = nil
    while try r.next() {
      rows += 1
      let key = try r.text(0)
      func integer(_ range: ClosedRange<Int64>) throws(SnapshotError) -> Int64 {
        let text = try r.text(1)
        guard let v = AppSettings.decimalInteger(text), range.contains(v) else {
          let bounds =
            range.upperBound == .max
            ? "at least \(range.lowerBound)" : "\(range.lowerBound)..\(range.upperBound)"
          throw r.fail(
            1,
            "\(key) '\(text)' is not a decimal integer \(bounds) (digits only, no sign or leading zeros)"
          )
        }
        return v
      }
      func oneOf<T: CaseIterable & RawRepresentable<String>>(_: T.Type) throws(SnapshotError) -> T {
        let allowed = T.allCases.map(\.rawValue).joined(separator: ", ")
        return try required(r, 1, allowed, T.init(rawValue:))
      }
      switch key {
      case "schema_version":
        let version = try r.text(1)
        guard version == "1" else {
          throw r.fail(1, "schema_version '\(version)' is not supported (expected '1')")
        }
      case "default_chat_level":
        settings.defaultChatLevel = try required(
          r, 1, "all, mentions or none", Level.init(chatLevel:))
      case "default_call_level":
        settings.defaultCallLevel = try required(r, 1, "all or none", Level.init(callLevel:))
      case "default_chat_level.direct", "default_chat_level.group", "default_chat_level.broadcast":
        let scope = Scope(name: String(key.dropFirst("default_chat_level.".count)))!
        settings.kindChatLevel[Int(scope.rawValue)] = try required(
          r, 1, "all, mentions or none", Level.init(chatLevel:))
      case "large_channel_members": largeMembers = try integer(1...Int64.max)
      case "large_channel_level":
        largeLevel = try required(r, 1, "mentions or none") {
          $0 == "all" ? nil : Level(chatLevel: $0)
        }
      case "mention_all_max_members": settings.mentionAllMaxMembers = try integer(1...Int64.max)
      case "presence_action": settings.presenceAction = try oneOf(PresenceAction.self)
      case "presence_delay_ms": settings.presenceDelayMilliseconds = try integer(0...604_800_000)
      case "default_quiet_action": settings.defaultQuietAction = try oneOf(QuietAction.self)
      case "throttle_messages": throttleMessages = try integer(1...Int64.max)
      case "throttle_window_ms": throttleWindow = try integer(1...Int64.max)
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
        table: "settings", key: "key='\(present)'", column: "value",
        reason: "\(present) is set but \(missing) is missing (the two come together)")
    }
    try together(
      "large_channel_members", largeMembers != nil, "large_channel_level", largeLevel != nil)
    try together(
      "throttle_messages", throttleMessages != nil, "throttle_window_ms", throttleWindow != nil)
    if let largeMembers, let largeLevel {
      settings.largeChannel = .init(members: largeMembers, level: largeLevel)
    }
    if let throttleMessages, let throttleWindow {
      settings.throttle = .init(messages: throttleMessages, windowMilliseconds: throttleWindow)
    }
    count("settings", rows)
  }

  /// Reads a table whose rows must come in byte order of their text id
  /// (users, channels: ids are numbered in that order). First in rowid
  /// order: tables are usually written in id order, and that spares SQLite a
  /// walk of the id index with a table lookup per row. If the ids are not in
  /// order there, or anything else is wrong, that pass is forgotten and the
  /// table is read again in index order, where every check applies as always.
  mutating func readInIDOrder(
    _ id: String, _ read: (inout Load, _ orderBy: String?) throws(SnapshotError) -> Void
  ) throws(SnapshotError) {
    let before = self
    do throws(SnapshotError) {
      try read(&self, nil)
      return
    } catch {
      self = before
    }
    try read(&self, "\(id) COLLATE BINARY")
  }

  mutating func readUsers(orderBy: String?) throws(SnapshotError) {
    let r = try reader("users", key: [0], orderBy: orderBy)
    users = StringTable(capacity: try rowCount("users"))
    while try r.next() {
      let id = try r.textBytes(0)
      if let last = users.count > 0 ? users.count - 1 : nil {
        if users.pool.equals(last, id) { throw r.fail(0, "duplicate key") }
        guard users.pool.precedes(last, id) else {
          throw r.fail(
            0, "user ids are not in byte order; the database must use UTF-8 text encoding")
        }
      }
      users.append(id)  // strictly after its predecessor, so new
      userPrefs.append(try LevelRow(r, first: 1))
      let zoneName = try r.optionalText(8) ?? "UTC"
      if let z = zoneIDs[zoneName] {
        userZone.append(z)
      } else {
        do {
          zones.append(try tzdb.zone(named: zoneName))
        } catch {
          throw r.fail(8, "unknown time zone '\(zoneName)' (\(error.reason))")
        }
        zoneIDs[zoneName] = UInt16(zones.count - 1)
        userZone.append(UInt16(zones.count - 1))
      }
      switch (try r.optionalMinute(9), try r.optionalMinute(10)) {
      case (nil, nil): dailyDND.append(nil)
      case (let start?, let end?): dailyDND.append((start, end))
      case (nil, _): throw r.fail(9, "dnd_start is NULL but dnd_end is set (both or neither)")
      case (_, nil): throw r.fail(10, "dnd_end is NULL but dnd_start is set (both or neither)")
      }
      let quietAction = try r.enumerated(12, "drop or defer", QuietAction.init(rawValue:))
      userDefers.append((quietAction ?? settings.defaultQuietAction) == .defer)
    }
    count("users", users.count)
    info.timeZones = zoneIDs.keys.sorted()
    scopeRow = Array(repeating: -1, count: users.count * 3)
  }

  mutating func readWeekly() throws(SnapshotError) {
    let r = try reader("dnd_weekly", key: [0, 1, 2])
    while try r.next() {
      let u = try user(r, 0)
      let weekday = try r.int(1)
      guard (1...7).contains(weekday) else { throw r.fail(1, "weekday \(weekday) is outside 1..7") }
      let start = try r.minute(2)
      let end = try r.minute(3)
      guard start < end else { throw r.fail(3, "end_min \(end) is not after start_min \(start)") }
      weekly.append((u, Int(weekday), start, end))
    }
    count("dnd_weekly", weekly.count)
  }

  mutating func readChannels(orderBy: String?) throws(SnapshotError) {
    let r = try reader("channels", key: [0], orderBy: orderBy)
    while try r.next() {
      let id = try r.textBytes(0)
      if let last = channelNames.count > 0 ? channelNames.count - 1 : nil {
        if channelNames.equals(last, id) { throw r.fail(0, "duplicate key") }
        guard channelNames.precedes(last, id) else {
          throw r.fail(
            0, "channel ids are not in byte order; the database must use UTF-8 text encoding")
        }
      }
      channelNames.append(id)
      channelScope.append(try required(r, 1, "direct, group or broadcast", Scope.init(name:)))
      if r.hasColumn(2) {
        // Below the channel's rows in members, which are never negative.
        let declared = try r.optionalInt(2)
        if let declared, declared < 0 { throw r.fail(2, "member_count \(declared) is negative") }
        channelMemberCount.append(declared ?? -1)
      }
    }
  }

  /// Reads members in two ranges of channel ids at once, on two connections:
  /// the largest table, and each range comes back sorted, so the two simply
  /// follow each other. The first range's error wins, as in one scan.
  mutating func readMembers() throws(SnapshotError) {
    var keys: [UInt64]
    if let split = try memberSplit() {  // even small tables split, so most tests take this path
      let first = MemberRange(upper: split)
      let second = MemberRange(lower: split)
      let (users, channelNames) = (users, channelNames)
      let handed = readers!.take()
      let later = Pending { () -> Result<[UInt64], SnapshotError> in
        Result { () throws(SnapshotError) in
          try second.read(handed.connection, users: users, channelNames: channelNames)
        }
      }
      keys = try first.read(connection, users: users, channelNames: channelNames)
      keys += try later.wait().get()
    } else {
      keys = try MemberRange().read(connection, users: users, channelNames: channelNames)
    }
    memberKeys = keys
    count("members", memberKeys.count)
  }

  /// Refuses a member_count below the channel's rows in members: checked
  /// once the members are read, so after any error in that table.
  func checkMemberCounts() throws(SnapshotError) {
    guard !channelMemberCount.isEmpty else { return }
    let rows = memberRowsPerChannel()
    for c in channelMemberCount.indices {
      let declared = channelMemberCount[c]
      if declared >= 0 && declared < rows[c] {
        throw SnapshotError(
          table: "channels", key: "channel_id='\(channelNames.string(c))'", column: "member_count",
          reason: "member_count \(declared) is below the channel's \(rows[c]) rows in members")
      }
    }
  }

  /// Each channel's rows in members.
  func memberRowsPerChannel() -> [Int32] {
    var rows = [Int32](repeating: 0, count: channelScope.count)
    for key in memberKeys { rows[Int(key >> 32)] += 1 }
    return rows
  }

  /// A channel id near the middle of the members table in byte order, from
  /// 256 rows sampled at evenly spaced rowids (a few index seeks, where an
  /// exact median would step through half the table). Nil when the table
  /// has no text channel id or no rowid (`WITHOUT ROWID`): one range then.
  /// The split only balances the work; any split gives the same keys.
  func memberSplit() throws(SnapshotError) -> String? {
    var samples: [[UInt8]] = []
    do {
      // One aggregate per query: SQLite answers a lone min() or max() from the b-tree's end.
      let low = try connection.prepare("SELECT min(rowid) FROM members")
      let high = try connection.prepare("SELECT max(rowid) FROM members")
      guard try low.step(), try high.step(), low.type(0) == SQLITE_INTEGER else { return nil }
      let (first, last) = (low.int64(0), high.int64(0))
      let row = try connection.prepare(
        "SELECT channel_id FROM members WHERE rowid >= ? ORDER BY rowid LIMIT 1")
      for i in Int64(0)..<256 {
        row.bind(1, first + (last - first) / 256 * i + (last - first) % 256 * i / 256)
        if try row.step(), row.type(0) == SQLITE_TEXT { samples.append(Array(row.textBytes(0))) }
        row.reset()
      }
    } catch {
      return nil  // no rowid
    }
    guard !samples.isEmpty else { return nil }
    samples.sort { $0.lexicographicallyPrecedes($1) }
    return String(decoding: samples[samples.count / 2], as: UTF8.self)
  }

  /// The number of rows in `table`, to size arrays and hash tables up front.
  func rowCount(_ table: String) throws(SnapshotError) -> Int {
    do {
      let statement = try connection.prepare("SELECT count(*) FROM \"\(table)\"")
      _ = try statement.step()
      return Int(statement.int64(0))
    } catch {
      throw SnapshotError(table: table, reason: error.message, sqlite: error)
    }
  }

  mutating func readScopePrefs() throws(SnapshotError) {
    let r = try reader("scope_prefs", key: [0, 1])
    while try r.next() {
      let u = try user(r, 0)
      let scope = try required(r, 1, "direct, group or broadcast", Scope.init(name:))
      let slot = Int(u) * 3 + Int(scope.rawValue)
      guard scopeRow[slot] < 0 else { throw r.fail(nil, "duplicate key") }
      scopeRow[slot] = Int32(scopePrefs.count)
      scopePrefs.append(try LevelRow(r, first: 2))
    }
    count("scope_prefs", scopePrefs.count)
  }

  mutating func readChannelPrefs() throws(SnapshotError) {
    let r = try reader("channel_prefs", key: [0, 1])
    var userKeys = KeyBatch()
    var channelKeys = KeyBatch()
    var awaitingIDs: [LevelRow] = []

    func resolveIDs() throws(SnapshotError) {
      userKeys.resolve(in: users)
      channelKeys.resolve(in: channels)
      for k in 0..<userKeys.count {
        let (u, c) = (userKeys.ids[k], k < channelKeys.count ? channelKeys.ids[k] : 0)
        guard u >= 0, c >= 0 else {
          // A row whose later column failed is the reader's current row.
          let key =
            k < awaitingIDs.count
            ? "user_id='\(userKeys.name(k))', channel_id='\(channelKeys.name(k))'" : r.rowKey
          throw SnapshotError(
            table: "channel_prefs", key: key, column: u < 0 ? "user_id" : "channel_id",
            reason: u < 0
              ? "unknown user '\(userKeys.name(k))'" : "unknown channel '\(channelKeys.name(k))'")
        }
        guard k < awaitingIDs.count else { return }  // the failing row: its own error follows
        channelPrefKeys.append(
          (UInt64(UInt32(c)) << 32 | UInt64(UInt32(u)), Int32(channelPrefs.count)))
        channelPrefs.append(awaitingIDs[k])
      }
      userKeys.removeAll()
      channelKeys.removeAll()
      awaitingIDs.removeAll(keepingCapacity: true)
    }

    do throws(SnapshotError) {
      while try r.next() {
        userKeys.append(try r.textBytes(0))
        channelKeys.append(try r.textBytes(1))
        awaitingIDs.append(try LevelRow(r, first: 2, acceptDefault: true))
        if userKeys.isFull { try resolveIDs() }
      }
    } catch {
      try resolveIDs()  // an earlier row's unknown id is the error a row-by-row scan meets first
      throw error
    }
    try resolveIDs()
    channelPrefKeys.sort { $0.key < $1.key }
    for i in channelPrefKeys.indices.dropFirst()
    where channelPrefKeys[i].key == channelPrefKeys[i - 1].key {
      throw .duplicatePair(
        in: "channel_prefs", key: channelPrefKeys[i].key, channels: channelNames, users: users)
    }
    count("channel_prefs", channelPrefs.count)
  }

  mutating func readCategories() throws(SnapshotError) {
    let r = try reader("categories", key: [0], orderBy: "category COLLATE BINARY")
    while try r.next() {
      guard categories.insert(try r.textBytes(0)) != nil else { throw r.fail(nil, "duplicate key") }
      categoryDefault.append(try required(r, 1, "opt_in or opt_out", Preference.init(name:)))
      categoryMandatory.append(try r.flag(2))
    }
    count("categories", categories.count)
  }

  mutating func readDevices() throws(SnapshotError) {
    let r = try reader("devices", key: [0], orderBy: "device_id")
    var gatewayTokens = StringTable(capacity: try rowCount("devices"))
    var pair: [UInt8] = []
    var lastID: Int64? = nil
    var userKeys = KeyBatch()
    var awaitingUser: [(id: Int64, gateway: Int32)] = []

    func resolveUsers() throws(SnapshotError) {
      userKeys.resolve(in: users)
      for (k, row) in awaitingUser.enumerated() {
        let u = userKeys.ids[k]
        guard u >= 0 else {
          throw SnapshotError(
            table: "devices", key: "device_id=\(row.id)", column: "user_id",
            reason: "unknown user '\(userKeys.name(k))'")
        }
        devices.append((row.id, u, row.gateway))
      }
      userKeys.removeAll()
      awaitingUser.removeAll(keepingCapacity: true)
    }

    do throws(SnapshotError) {
      while try r.next() {
        let id = try r.int(0)
        if let lastID, lastID >= id { throw r.fail(0, "duplicate key") }
        lastID = id
        userKeys.append(try r.textBytes(1))
        let gatewayName = try r.textBytes(2)
        guard SnapshotSchema.isValidGatewayName(gatewayName) else {
          throw r.fail(
            2,
            "gateway '\(try r.text(2))' is not a valid name ([a-z0-9][a-z0-9._-]*, at most "
              + "\(SnapshotSchema.maxGatewayNameBytes) bytes, not decisions, summary or rejected)"
          )
        }
        let g = try gateway(r, 2)
        let token = try r.textBytes(3)
        pair.removeAll(keepingCapacity: true)
        pair.append(contentsOf: gatewayName)
        pair.append(0)
        pair.append(contentsOf: token)
        guard pair.withUnsafeBytes({ gatewayTokens.insert($0) }) != nil else {
          throw r.fail(
            3,
            "token is already registered on gateway '\(try r.text(2))' (gateway, token) must be unique"
          )
        }
        tokens.appendQuoted(token)
        awaitingUser.append((id, g))
        if userKeys.isFull { try resolveUsers() }
      }
    } catch {
      // This row's user, or an earlier one's, is the error a row-by-row scan meets first.
      if userKeys.count > awaitingUser.count { awaitingUser.append((lastID ?? 0, 0)) }
      try resolveUsers()
      throw error
    }
    try resolveUsers()
    count("devices", devices.count)
  }

  mutating func readCategoryGateways() throws(SnapshotError) {
    let r = try reader("category_gateways", key: [0, 1])
    var seen: Set<UInt64> = []
    var rows = 0
    while try r.next() {
      rows += 1
      let c = try category(r, 0)
      let g = try gateway(r, 1)
      guard seen.insert(UInt64(UInt32(c)) << 32 | UInt64(UInt32(g))).inserted else {
        throw r.fail(nil, "duplicate key")
      }
      if try r.flag(2) { categoryGateways.append((c, g)) }
    }
    count("category_gateways", rows)
  }

  mutating func readCategoryPrefs() throws(SnapshotError) {
    let r = try reader("category_prefs", key: [0, 1, 2])
    var seen: Set<[Int32]> = []
    while try r.next() {
      let u = try user(r, 0)
      let c = try category(r, 1)
      let g = r.isNull(2) ? -1 : try gateway(r, 2)
      let pref = try required(r, 3, "opt_in or opt_out", Preference.init(name:))
      guard seen.insert([u, c, g]).inserted else {
        throw r.fail(nil, "two rows for the same (user_id, category, gateway)")
      }
      categoryPrefRows.append((u, c, g, pref))
    }
    count("category_prefs", categoryPrefRows.count)
  }

  mutating func readUserMutes() throws(SnapshotError) {
    let r = try reader("user_mutes", key: [0, 1])
    var seen: Set<UInt64> = []
    while try r.next() {
      let u = try user(r, 0)
      let muted = try user(r, 1)
      guard seen.insert(UInt64(UInt32(u)) << 32 | UInt64(UInt32(muted))).inserted else {
        throw r.fail(nil, "duplicate key")
      }
      mutes.append((u, muted))
    }
    count("user_mutes", mutes.count)
  }

  mutating func readThreadPrefs() throws(SnapshotError) {
    let r = try reader("thread_prefs", key: [0, 1, 2])
    var seen: Set<[Int32]> = []
    while try r.next() {
      let u = try user(r, 0)
      guard let c = channels.find(try r.textBytes(1)) else {
        throw r.fail(1, "unknown channel '\(try r.text(1))'")
      }
      let id = try r.textBytes(2)
      let thread = threadIDs.find(id) ?? threadIDs.insert(id)!
      let level = try required(r, 3, "all, mentions or none", Level.init(chatLevel:))
      guard seen.insert([u, c, thread]).inserted else { throw r.fail(nil, "duplicate key") }
      threadPrefRows.append((u, c, thread, level))
    }
    count("thread_prefs", threadPrefRows.count)
  }

  mutating func readPresence() throws(SnapshotError) {
    let r = try reader("presence", key: [0, 1, 2])
    while try r.next() {
      presence.append((try user(r, 0), try r.int(1), try r.int(2)))
    }
    count("presence", presence.count)
  }

  mutating func readGatewayPrefs() throws(SnapshotError) {
    let r = try reader("gateway_prefs", key: [0, 1])
    var seen: Set<UInt64> = []
    while try r.next() {
      let u = try user(r, 0)
      let g = try gateway(r, 1)
      let key = UInt64(UInt32(u)) << 32 | UInt64(UInt32(g))
      guard seen.insert(key).inserted else { throw r.fail(nil, "duplicate key") }
      if try r.flag(2) { restricted.insert(key) }
    }
    count("gateway_prefs", seen.count)
  }
}
