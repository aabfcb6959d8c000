import FanoutIndex
import FanoutModel
import FanoutSQLite
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
  /// is added to it. With a `base`, `path` is a what-if scenario's overlay
  /// (`ScenarioCopy`): the tables it lacks are read from `base`, and no
  /// cache is used; given the base's `rows` too (`loadKeepingRows`), only the
  /// overlay's tables are read. The rows are taken either way.
  public static func load(
    path: String, base: String? = nil, over rows: SnapshotRows? = nil,
    timeZones: TimeZoneDatabase = TimeZoneDatabase(),
    busyTimeoutMilliseconds: Int = defaultBusyTimeoutMilliseconds, cache: IndexCache? = nil
  ) throws(SnapshotError) -> Snapshot {
    if base == nil { _ = rows?.take() }  // not an overlay: of no use, and their memory goes now
    return try loadNoting(
      path: path, base: base, over: rows, timeZones: timeZones,
      busyTimeoutMilliseconds: busyTimeoutMilliseconds, cache: base == nil ? cache : nil
    ).snapshot
  }

  /// `load`, keeping the rows the index was built from when it was loaded
  /// from SQLite (nil when it came from a cache), for loading an overlay
  /// of it. They are memory the index alone does not hold.
  public static func loadKeepingRows(
    path: String, timeZones: TimeZoneDatabase = TimeZoneDatabase(),
    busyTimeoutMilliseconds: Int = defaultBusyTimeoutMilliseconds, cache: IndexCache? = nil
  ) throws(SnapshotError) -> (snapshot: Snapshot, rows: SnapshotRows?) {
    let loaded = try loadNoting(
      path: path, timeZones: timeZones, busyTimeoutMilliseconds: busyTimeoutMilliseconds,
      cache: cache, keepRows: true)
    return (loaded.snapshot, loaded.rows)
  }

  /// `load`, also giving the state the snapshot was read in when it can
  /// be cached (nil without a cache, or while the file is being written).
  static func loadNoting(
    path: String, base: String? = nil, over rows: SnapshotRows? = nil,
    timeZones: TimeZoneDatabase, busyTimeoutMilliseconds: Int, cache: IndexCache?,
    keepRows: Bool = false
  ) throws(SnapshotError) -> (snapshot: Snapshot, state: SnapshotFingerprint?, rows: SnapshotRows?)
  {
    try SnapshotError.checkFile(path)
    let read = try readOnce(
      path: path, base: base, over: rows, timeZones: timeZones,
      busyTimeoutMilliseconds: busyTimeoutMilliseconds, cache: cache, keepRows: keepRows)
    // Written once the read transaction is over, so that no writer waits
    // for it, and aside, so that the run does not.
    if let cache, let state = read.state, !read.fromCache {
      cache.storeAside(read.snapshot, fingerprint: state)
    }
    return (read.snapshot, read.state, read.rows)
  }

  /// Reads the snapshot in one read transaction: from `cache` when it holds
  /// the state found there, else from SQLite.
  private static func readOnce(
    path: String, base: String?, over rows: SnapshotRows?, timeZones: TimeZoneDatabase,
    busyTimeoutMilliseconds: Int, cache: IndexCache?, keepRows: Bool
  ) throws(SnapshotError) -> (
    snapshot: Snapshot, state: SnapshotFingerprint?, fromCache: Bool, rows: SnapshotRows?
  ) {
    let readers: ConsistentReads
    do {
      readers = try ConsistentReads(
        path: path, base: base, connections: connections,
        busyTimeoutMilliseconds: busyTimeoutMilliseconds)
    } catch {
      // Looked at only once SQLite has found no database there (a file
      // opened and closed here would drop this process's locks on it).
      if error.resultCode.primary == .notADatabase, CompiledSnapshot.isCompiled(path) {
        return (try loadCompiled(path, timeZones: timeZones), nil, false, nil)
      }
      throw SnapshotError.reading(path, error, waited: busyTimeoutMilliseconds)
    }
    // Inside the read transaction: the header is that of the state read.
    let state =
      cache == nil ? nil : SnapshotFingerprint(path: path, header: readers.main.fileHeader())
    if let cache, let state, let snapshot = cache.snapshot(for: state, timeZones: timeZones) {
      return (snapshot, state, true, nil)
    }
    // Taken, so that a whole load below does not hold them too.
    if var load = rows?.take() {
      (load.readers, load.connection, load.path) = (readers, readers.main, path)
      if let snapshot = try load.rerun(changed: load.overlayTables()) {
        return (snapshot, nil, false, nil)
      }
    }
    var load = Load(readers: readers, path: path, tzdb: timeZones)
    let snapshot = try load.run()
    // Cacheable only if nothing changed meanwhile (a commit to the WAL would).
    let unchanged =
      state != nil && SnapshotFingerprint(path: path, header: readers.main.fileHeader()) == state
    if keepRows { readers.endReads() }  // the rows outlive the read: no lock kept on the file
    return (
      snapshot, unchanged ? state : nil, false,
      keepRows ? SnapshotRows(load, index: snapshot.index) : nil
    )
  }

  /// Compiles the snapshot at `path` to `output` (`fanout snapshot compile
  /// --out`), or into `cache` when `output` is nil. Returns the file written.
  public static func compile(
    path: String, output: String?, cache: IndexCache?,
    timeZones: TimeZoneDatabase = TimeZoneDatabase(),
    busyTimeoutMilliseconds: Int = defaultBusyTimeoutMilliseconds
  ) throws(SnapshotError.Compile) -> String {
    func loaded(into cache: IndexCache?) throws(SnapshotError.Compile) -> (
      Snapshot, SnapshotFingerprint?
    ) {
      do {
        let read = try loadNoting(
          path: path, timeZones: timeZones, busyTimeoutMilliseconds: busyTimeoutMilliseconds,
          cache: cache)
        return (read.snapshot, read.state)
      } catch { throw .snapshot(error) }
    }
    if let output {
      let (snapshot, _) = try loaded(into: nil)
      do {
        // Readable by group and others only where the snapshot is.
        var st = stat()
        let shared = stat(path, &st) == 0 ? st.st_mode & 0o044 : 0
        try CompiledSnapshot.write(
          snapshot, key: SnapshotFingerprint.buildKey, to: output, mode: 0o600 | shared)
      } catch { throw .cannotWrite("'\(output)': \(error)") }
      return output
    }
    guard let cache else {
      throw .cannotWrite(
        "no index cache folder (neither XDG_CACHE_HOME nor HOME is set; use --out)")
    }
    let (_, state) = try loaded(into: cache)
    guard let fingerprint = state else {
      throw .snapshot(
        SnapshotError(
          busy: path,
          reason: "it is being written (a -wal or -journal file beside it, or a change in the "
            + "last \(SnapshotFingerprint.settleSeconds) s); not cached"))
    }
    // The load read it from the cache or has just stored it there (aside:
    // waited for).
    IndexCache.waitForWritesAside()
    let file = cache.directory + "/" + fingerprint.fileName
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

/// One load: a schedule of table readers, and what they returned, for the
/// build (Load+Build.swift).
///
/// Each table is read by a function of its own (Tables/), given what it
/// needs and returning its rows. The large ones that need little run aside,
/// on another core with a connection of their own (all connections see one
/// committed state); the rest run here. Whichever finishes first, `run()`
/// takes the results in schema order, so the refusal reported is the first
/// a serial load in schema order would meet.
struct Load {
  var connection: Connection
  /// Where aside reads get their connections.
  var readers: ConsistentReads
  var path: String
  let tzdb: TimeZoneDatabase
  var info = SnapshotInfo()
  var present: Set<String> = []

  var settings = AppSettings()

  var users = StringTable()
  var userPrefs: [LevelRow] = []
  var userZone: [UInt16] = []
  var dailyDND: [(start: Int, end: Int)?] = []
  var zones: [ZoneTable] = []
  var userQuietActions: [QuietAction?] = []
  /// The index these rows built, kept for an overlay's load (`SnapshotRows`).
  var base: Index? = nil
  var weekly: [(user: Int32, weekday: Int, start: Int, end: Int)] = []

  var channels = StringTable()
  var channelNames = BytePool()
  /// The channel ids being hashed on another core, until taken.
  var pendingChannels: Pending<StringTable>? = nil
  var channelScope: [Scope] = []
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
  /// The gateways of devices alone (gateway_prefs adds its own to `gatewaysSeen`).
  var deviceGateways = StringTable()
  var devices: [(id: Int64, user: Int32, gateway: Int32)] = []
  var tokens = BytePool()
  var categoryGateways: [(category: Int32, gateway: Int32)] = []  // mandatory ones
  var categoryPrefRows: [(user: Int32, category: Int32, gateway: Int32, pref: Preference)] = []
  var restricted: Set<UInt64> = []  // GatewayPrefRows.restrictionKey
  var mutes: [(user: Int32, muted: Int32)] = []
  var threadIDs = StringTable()
  var threadPrefRows: [(user: Int32, channel: Int32, thread: Int32, level: Level)] = []
  var presence: [(user: Int32, from: Int64, until: Int64)] = []

  init(readers: ConsistentReads, path: String, tzdb: TimeZoneDatabase) {
    connection = readers.main
    self.readers = readers
    self.path = path
    self.tzdb = tzdb
  }

  mutating func run() throws(SnapshotError) -> Snapshot {
    try checkSchema()
    let main = connection
    // Channels need nothing: started first.
    let channelsRead = aside { connection throws(SnapshotError) in
      try ChannelRows.read(connection)
    }
    if present.contains("settings") {
      let (settings, rows) = try SettingsTable.read(main)
      self.settings = settings
      count("settings", rows)
    }
    take(try UserRows.read(main, tzdb: tzdb))
    let groups = settings.notificationGroups != nil
    let devicesRead = aside { [users] connection throws(SnapshotError) in
      try DeviceRows.read(connection, users: users, notificationGroups: groups)
    }
    if present.contains("dnd_weekly") {
      weekly = try WeeklyTable.read(main, users: users)
      count("dnd_weekly", weekly.count)
    }
    take(try channelsRead.result())
    let channelPrefsRead = channelPrefsAside()
    try readMembers()
    try ChannelRows(names: channelNames, scopes: channelScope, memberCounts: channelMemberCount)
      .checkMemberCounts(memberKeys: memberKeys)
    take(present.contains("scope_prefs") ? try ScopePrefRows.read(main, users: users) : nil)
    awaitChannels()
    take(try channelPrefsRead.result())
    // Categories are read here while the devices finish aside; the devices
    // come first in the schema, so their result is taken first.
    let categoriesRead = Result { () throws(SnapshotError) in
      present.contains("categories") ? try CategoryRows.read(main) : nil
    }
    take(try devicesRead.result())
    if let rows = try categoriesRead.get() { take(rows) }
    take(
      try GatewayPrefRows.read(
        main, present: present, users: users, categories: categories, gateways: gatewaysSeen))
    try readLastTables { [present] in present.contains($0) }
    return build()
  }

  /// Reads the tables that come last in the schema and that nothing else
  /// depends on, those `reading` names: user_mutes, thread_prefs, presence.
  mutating func readLastTables(_ reading: (String) -> Bool) throws(SnapshotError) {
    if reading("user_mutes") {
      mutes = try UserMutesTable.read(connection, users: users)
      count("user_mutes", mutes.count)
    }
    if reading("thread_prefs") {
      take(try ThreadPrefRows.read(connection, users: users, channels: channels))
    }
    if reading("presence") {
      presence = try PresenceTable.read(connection, users: users)
      count("presence", presence.count)
    }
  }

  /// Starts `read` on another core, on a connection of its own.
  func aside<T: Sendable>(_ read: @escaping @Sendable (Connection) throws(SnapshotError) -> T)
    -> TableRead<T>
  {
    TableRead(readers.take(), read)
  }

  /// Call after taking the channels: the reader waits for the channel hash itself.
  func channelPrefsAside() -> TableRead<ChannelPrefRows> {
    guard let channelHash = pendingChannels else {
      preconditionFailure("channelPrefsAside before the channels were taken")
    }
    return aside { [users, channelNames] connection throws(SnapshotError) in
      try ChannelPrefRows.read(
        connection, users: users, channels: channelHash.wait(), channelNames: channelNames)
    }
  }

  // MARK: Taking each table's rows

  mutating func count(_ table: String, _ rows: Int) {
    if let i = info.rowCounts.firstIndex(where: { $0.table == table }) {
      info.rowCounts[i].rows = rows  // read again for an overlay (`Load+Overlay`)
    } else {
      info.rowCounts.append((table, rows))
    }
  }

  mutating func take(_ rows: UserRows) {
    users = rows.users
    userPrefs = rows.prefs
    userZone = rows.zone
    zones = rows.zones
    dailyDND = rows.dailyDND
    userQuietActions = rows.quietActions
    info.timeZones = rows.zoneNames
    count("users", users.count)
  }

  /// Takes the channels and starts hashing their ids on another core.
  mutating func take(_ rows: ChannelRows) {
    channelNames = rows.names
    channelScope = rows.scopes
    channelMemberCount = rows.memberCounts
    count("channels", channelNames.count)
    pendingChannels = Pending { [channelNames] in StringTable(indexing: channelNames) }
  }

  /// Takes the channel table once its hashing is done.
  mutating func awaitChannels() {
    if let pending = pendingChannels {
      channels = pending.wait()
      pendingChannels = nil
    }
  }

  /// Takes scope_prefs, or its absence (nil).
  mutating func take(_ rows: ScopePrefRows?) {
    scopeRow = rows?.rowOf ?? Array(repeating: -1, count: users.count * 3)
    scopePrefs = rows?.prefs ?? []
    if rows != nil { count("scope_prefs", scopePrefs.count) }
  }

  mutating func take(_ rows: ChannelPrefRows) {
    channelPrefKeys = rows.keys
    channelPrefs = rows.prefs
    count("channel_prefs", channelPrefs.count)
  }

  mutating func take(_ rows: DeviceRows) {
    devices = rows.devices
    tokens = rows.tokens
    gatewaysSeen = rows.gateways
    deviceGateways = rows.gateways
    count("devices", devices.count)
  }

  mutating func take(_ rows: CategoryRows) {
    categories = rows.categories
    categoryMandatory = rows.mandatory
    categoryDefault = rows.defaults
    count("categories", categories.count)
  }

  mutating func take(_ rows: GatewayPrefRows) {
    gatewaysSeen = rows.gateways
    categoryGateways = rows.mandatory
    categoryPrefRows = rows.categoryPrefs
    restricted = rows.restricted
    if present.contains("category_gateways") {
      count("category_gateways", rows.categoryGatewayRows)
    }
    if present.contains("category_prefs") { count("category_prefs", categoryPrefRows.count) }
    if present.contains("gateway_prefs") { count("gateway_prefs", rows.gatewayPrefRows) }
  }

  mutating func take(_ rows: ThreadPrefRows) {
    threadIDs = rows.threads
    threadPrefRows = rows.rows
    count("thread_prefs", threadPrefRows.count)
  }

  // MARK: Schema

  /// Refuses a database that stores its text as UTF-16. The loader reads
  /// ids in SQLite's BINARY order and relies on it being the byte order of
  /// their UTF-8 (ids are numbered in that order); in a UTF-16 database
  /// BINARY compares UTF-16 code units, which order some ids differently.
  /// (An overlay's file is made by Fanout, in UTF-8, and SQLite attaches
  /// only databases of its main file's encoding.)
  func checkEncoding() throws(SnapshotError) {
    let encoding: String
    do {
      let pragma = try connection.prepare("PRAGMA encoding")
      encoding = try pragma.step() ? pragma.text(0) : "UTF-8"
    } catch {
      throw SnapshotError(reason: "not a readable SQLite database: \(error.message)", sqlite: error)
    }
    guard encoding == "UTF-8" else {
      throw SnapshotError(
        reason: "text encoding \(encoding): Fanout reads UTF-8 snapshots "
          + "(`sqlite3 SNAPSHOT .dump | sqlite3 NEW` makes a UTF-8 copy)")
    }
  }

  mutating func checkSchema() throws(SnapshotError) {
    var names: [String: String] = [:]  // lower-cased -> as declared
    var notPlain: [String: String] = [:]  // lower-cased -> what it is instead
    do {
      // An overlay's tables, and its base's (`load(path:base:)`).
      let list = try connection.prepare(
        connection.schemas.map {
          "SELECT name, type, coalesce(sql, '') FROM \($0).sqlite_master "
            + "WHERE type IN ('table', 'view')"
        }.joined(separator: " UNION ALL "))
      while try list.step() {
        let name = list.text(0).lowercased()
        guard names[name] == nil else { continue }  // the overlay's own comes first
        names[name] = list.text(0)
        if list.text(1) == "view" {
          notPlain[name] = "a view"
        } else if list.text(2).uppercased().hasPrefix("CREATE VIRTUAL TABLE") {
          notPlain[name] = "a virtual table"
        }
      }
    } catch {
      throw SnapshotError(reason: "not a readable SQLite database: \(error.message)", sqlite: error)
    }
    try checkEncoding()
    for table in SnapshotSchema.tables {
      guard let declared = names[table.name] else {
        if table.required { throw SnapshotError(table: table.name, reason: "missing table") }
        continue
      }
      // A view's or a virtual table's rows are whatever code computes them,
      // which may never end: the contract's tables must hold their rows.
      if let what = notPlain[table.name] {
        throw SnapshotError(
          table: table.name, reason: "is \(what); a snapshot's tables must be plain tables")
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

  // MARK: Members

  /// Reads members in two ranges of channel ids at once, on two connections:
  /// the largest table, and each range comes back sorted, so the two simply
  /// follow each other. The first range's error wins, as in one scan.
  mutating func readMembers() throws(SnapshotError) {
    memberKeys = try MemberRange.readAll(
      connection, aside: readers.take, users: users, channelNames: channelNames)
    count("members", memberKeys.count)
  }
}

/// A table's read started on another core with a connection of its own;
/// `result()` waits for it and gives its rows or its refusal.
struct TableRead<T: Sendable> {
  private let pending: Pending<Result<T, SnapshotError>>

  init(
    _ handed: HandedConnection, _ read: @escaping @Sendable (Connection) throws(SnapshotError) -> T
  ) {
    pending = Pending { Result { () throws(SnapshotError) in try read(handed.connection) } }
  }

  func result() throws(SnapshotError) -> T { try pending.wait().get() }
}
