import FanoutIndex
import FanoutModel
import FanoutTime

extension Load {
  /// A device fragment's bytes besides its user's and token's JSON: the
  /// keys, and at most 20 digits and a sign for its id.
  static let deviceFragmentConstantBytes = #"{"user":,"device":,"token":"#.utf8.count + 20

  /// Parts of an index whose inputs an overlay left as the base's: they are
  /// the base's columns, shared, not built again (`rerun(changed:)`).
  struct SharedParts: OptionSet {
    let rawValue: Int
    /// The membership slots: members, channels, the three levels' rows
    /// and the defaults they fall back to.
    static let slots = SharedParts(rawValue: 1)
    /// Devices and gateways (`Load.gatewayTables`).
    static let devices = SharedParts(rawValue: 2)
  }

  /// Turns the validated rows into the index. Nothing here can fail. With
  /// a `base` (an overlay's), the user ids and the `shared` parts are its.
  mutating func build(over base: Index? = nil, sharing shared: SharedParts = []) -> Snapshot {
    let shared = base == nil ? [] : shared
    let userCount = users.count
    let pendingSlots = shared.contains(.slots) ? nil : startSlots()

    let (gatewayColumns, gatewayRenumber) = Self.gatewayColumns(
      seen: gatewaysSeen, categories: categories.count, users: userCount,
      categoryGateways: categoryGateways, categoryPrefs: categoryPrefRows)
    let gateways = gatewayColumns.gateways

    var userJSON = base?.userJSON ?? BytePool()
    if base == nil {
      userJSON.reserveCapacity(strings: userCount, bytes: users.pool.bytes.count + 2 * userCount)
      for u in 0..<userCount { users.pool.withBytes(u) { userJSON.appendQuoted($0) } }
    }

    let devices: Index.DeviceColumns
    var devicesPerGateway = [Int](repeating: 0, count: gateways.count)
    if shared.contains(.devices), let base {
      devices = base.devices
      for g in devices.deviceGateway { devicesPerGateway[Int(g)] += 1 }
    } else {
      (devices, devicesPerGateway) = Self.deviceColumns(
        self.devices, tokens: tokens, restricted: restricted, gatewayRenumber: gatewayRenumber,
        gateways: gateways.count, users: userCount, userJSON: userJSON)
    }
    info.devicesPerGateway = (0..<gateways.count).compactMap {
      devicesPerGateway[$0] > 0 ? (gateways[$0], devicesPerGateway[$0]) : nil
    }

    let dnd = DNDPattern.schedules(users: userCount, daily: dailyDND, weekly: weekly)
    info.dndPatterns = dnd.patterns

    let slots: Index.Slots
    if let pendingSlots {
      var built = pendingSlots.take()
      info.snoozeGroups = built.snoozeGroupCount
      slots = built.columns()
    } else {
      let base = base!
      info.snoozeGroups = base.snoozeGroups.count - 1
      slots = base.slots
    }

    let index = Index(
      users: users, userJSON: userJSON, userZone: Column(userZone), userDND: Column(dnd.userDND),
      userDevices: devices.userDevices,
      userCategoryPrefs: gatewayColumns.categoryPrefs.userCategoryPrefs,
      deviceIDs: devices.deviceIDs,
      deviceGateway: devices.deviceGateway,
      deviceRestricted: devices.deviceRestricted, deviceJSON: devices.deviceJSON,
      channels: channels,
      channelScope: channelScope, channelMembers: slots.channelMembers,
      memberUser: slots.memberUser,
      memberSettings: slots.memberSettings, memberSnooze: slots.memberSnooze,
      snoozeGroups: slots.snoozeGroups, snoozeBounds: slots.snoozeBounds,
      dndWords: Column(dnd.words),
      zones: zones, gateways: gateways,
      gatewayJSON: gatewayColumns.gatewayJSON,
      categories: categories, categoryMandatory: Column(categoryMandatory),
      categoryDefault: Column(categoryDefault),
      categoryGatewayMandatory: gatewayColumns.categoryGatewayMandatory,
      categoryPrefCategory: gatewayColumns.categoryPrefs.category,
      categoryPrefGateway: gatewayColumns.categoryPrefs.gateway,
      categoryPref: gatewayColumns.categoryPrefs.pref,
      settings: settings, declaredMemberCount: channelMemberCount,
      mutedBy: MutedBy(users: userCount, mutes: mutes),
      threadPrefs: ThreadPrefs(threads: threadIDs, rows: threadPrefRows),
      presence: PresenceWindows(users: userCount, rows: presence),
      userQuietActions: userQuietActions)
    index.checkInvariants()
    return Snapshot(index: index, info: info)
  }

  /// The gateways `seen` (numbered as the tables named them), renumbered
  /// in name (byte) order so that every listing is sorted, with their JSON,
  /// the mandatory (category, gateway) pairs and the category preferences;
  /// and each seen number's row.
  static func gatewayColumns(
    seen: StringTable, categories: Int, users: Int,
    categoryGateways: [(category: Int32, gateway: Int32)],
    categoryPrefs: [(user: Int32, category: Int32, gateway: Int32, pref: Preference)]
  ) -> (Index.GatewayColumns, renumber: [Int32]) {
    let byName = (0..<seen.count).sorted {
      seen.pool[$0].lexicographicallyPrecedes(seen.pool[$1])
    }
    var renumber = [Int32](repeating: 0, count: seen.count)
    var gateways = StringTable()
    var json = BytePool()
    for old in byName {
      renumber[old] = Int32(gateways.count)
      seen.pool.withBytes(old) { _ = gateways.insert($0) }
      json.append(JSONText.quoted(seen.pool[old]))
    }
    var mandatory = [Bool](repeating: false, count: categories * gateways.count)
    for (c, g) in categoryGateways {
      mandatory[Int(c) * gateways.count + Int(renumber[Int(g)])] = true
    }
    let prefs = Index.CategoryPrefs(
      users: users,
      rows: categoryPrefs.map { row in
        (row.user, row.category, row.gateway < 0 ? Int32(-1) : renumber[Int(row.gateway)], row.pref)
      })
    let columns = Index.GatewayColumns(
      gateways: gateways, gatewayJSON: json, categoryGatewayMandatory: Column(mandatory),
      categoryPrefs: prefs)
    return (columns, renumber)
  }

  /// The columns of `devices` (read in device_id order): grouped by user,
  /// by device_id within a user; each device's gateway its row in the
  /// index's gateways (`gatewayRenumber` of the gateway number it was read
  /// with), restricted where `restricted` holds its user's restriction of
  /// that gateway number; and how many devices each gateway has.
  static func deviceColumns(
    _ devices: [(id: Int64, user: Int32, gateway: Int32)], tokens: BytePool,
    restricted: Set<UInt64>, gatewayRenumber: [Int32], gateways: Int, users userCount: Int,
    userJSON: BytePool
  ) -> (Index.DeviceColumns, perGateway: [Int]) {
    // They were read in device_id order, so placing them by user in that
    // order sorts them.
    var devicesOfUser = [Int32](repeating: 0, count: userCount + 1)
    for device in devices { devicesOfUser[Int(device.user) + 1] += 1 }
    for u in 0..<userCount { devicesOfUser[u + 1] += devicesOfUser[u] }
    var deviceOrder = [Int](repeating: 0, count: devices.count)
    var nextPlace = devicesOfUser
    for (d, device) in devices.enumerated() {
      deviceOrder[Int(nextPlace[Int(device.user)])] = d
      nextPlace[Int(device.user)] += 1
    }
    var perGateway = [Int](repeating: 0, count: gateways)
    var ids: [Int64] = []
    var gatewayOf: [UInt16] = []
    var restrictedOf: [Bool] = []
    var json = BytePool()
    json.reserveCapacity(
      strings: devices.count,
      bytes: devices.reduce(tokens.bytes.count) {
        $0 + userJSON.offsets[Int($1.user) + 1] - userJSON.offsets[Int($1.user)]
          + Self.deviceFragmentConstantBytes
      })
    var fragment: [UInt8] = []
    for d in deviceOrder {
      let device = devices[d]
      let g = gatewayRenumber[Int(device.gateway)]
      ids.append(device.id)
      gatewayOf.append(UInt16(g))
      perGateway[Int(g)] += 1
      restrictedOf.append(
        restricted.contains(
          GatewayPrefRows.restrictionKey(user: device.user, gateway: device.gateway)))
      fragment.removeAll(keepingCapacity: true)
      fragment += #"{"user":"#.utf8
      fragment += userJSON[Int(device.user)]
      fragment += #","device":"#.utf8
      JSONText.appendDecimal(device.id, to: &fragment)
      fragment += #","token":"#.utf8
      fragment += tokens[d]
      fragment.withUnsafeBytes { json.append($0) }
    }
    let columns = Index.DeviceColumns(
      userDevices: Column(devicesOfUser), deviceIDs: Column(ids), deviceGateway: Column(gatewayOf),
      deviceRestricted: Column(restrictedOf), deviceJSON: json)
    return (columns, perGateway)
  }

  /// The membership slots, built on a core of their own.
  private func startSlots() -> Pending<MembershipSlots> {
    let slotRows = MembershipSlots.Rows(
      memberKeys: memberKeys, channelScope: channelScope, userPrefs: userPrefs,
      scopeRow: scopeRow, scopePrefs: scopePrefs, channelPrefKeys: channelPrefKeys,
      channelPrefs: channelPrefs, defaultCall: settings.defaultCallLevel ?? .all)
    return Pending { MembershipSlots(slotRows) }
  }
}
