import FanoutIndex
import FanoutModel
import FanoutTime

extension Load {
  /// A device fragment's bytes besides its user's and token's JSON: the
  /// keys, and at most 20 digits and a sign for its id.
  static let deviceFragmentConstantBytes = #"{"user":,"device":,"token":"#.utf8.count + 20

  /// Turns the validated rows into the index. Nothing here can fail.
  mutating func build() -> Snapshot {
    let userCount = users.count
    // Each channel's default chat level; its size matters only to the large-channel rule.
    let rows = settings.largeChannel == nil ? [] : memberRowsPerChannel()
    func channelSize(_ c: Int) -> Int64 {
      let declared = channelMemberCount.isEmpty ? -1 : channelMemberCount[c]
      return declared >= 0 ? declared : rows.isEmpty ? 0 : Int64(rows[c])
    }
    let slotRows = MembershipSlots.Rows(
      memberKeys: memberKeys, channelScope: channelScope, userPrefs: userPrefs,
      scopeRow: scopeRow, scopePrefs: scopePrefs, channelPrefKeys: channelPrefKeys,
      channelPrefs: channelPrefs,
      channelDefaultChat: channelScope.indices.map {
        settings.defaultChatLevel(scope: channelScope[$0], members: channelSize($0))
      }, defaultCall: settings.defaultCallLevel ?? .all)
    let pendingSlots = Pending { MembershipSlots(slotRows) }

    // Gateways, renumbered in name (byte) order so that every listing is sorted.
    let byName = (0..<gatewaysSeen.count).sorted {
      gatewaysSeen.pool[$0].lexicographicallyPrecedes(gatewaysSeen.pool[$1])
    }
    var gatewayRenumber = [Int32](repeating: 0, count: gatewaysSeen.count)
    var gateways = StringTable()
    var gatewayJSON = BytePool()
    for old in byName {
      gatewayRenumber[old] = Int32(gateways.count)
      gatewaysSeen.pool.withBytes(old) { _ = gateways.insert($0) }
      gatewayJSON.append(JSONText.quoted(gatewaysSeen.pool[old]))
    }

    var userJSON = BytePool()
    userJSON.reserveCapacity(strings: userCount, bytes: users.pool.bytes.count + 2 * userCount)
    for u in 0..<userCount { users.pool.withBytes(u) { userJSON.appendQuoted($0) } }

    // Devices: grouped by user, by device_id within a user. They were read
    // in device_id order, so placing them by user in that order sorts them.
    var userDevices = [Int32](repeating: 0, count: userCount + 1)
    for device in devices { userDevices[Int(device.user) + 1] += 1 }
    for u in 0..<userCount { userDevices[u + 1] += userDevices[u] }
    var deviceOrder = [Int](repeating: 0, count: devices.count)
    var nextPlace = userDevices
    for (d, device) in devices.enumerated() {
      deviceOrder[Int(nextPlace[Int(device.user)])] = d
      nextPlace[Int(device.user)] += 1
    }
    var deviceIDs: [Int64] = []
    var deviceGateway: [UInt16] = []
    var deviceRestricted: [Bool] = []
    var deviceJSON = BytePool()
    deviceJSON.reserveCapacity(
      strings: devices.count,
      bytes: devices.reduce(tokens.bytes.count) {
        $0 + userJSON.offsets[Int($1.user) + 1] - userJSON.offsets[Int($1.user)]
          + Self.deviceFragmentConstantBytes
      })
    var fragment: [UInt8] = []
    var devicesPerGateway = [Int](repeating: 0, count: gateways.count)
    for d in deviceOrder {
      let device = devices[d]
      let g = gatewayRenumber[Int(device.gateway)]
      deviceIDs.append(device.id)
      deviceGateway.append(UInt16(g))
      devicesPerGateway[Int(g)] += 1
      deviceRestricted.append(
        restricted.contains(UInt64(UInt32(device.user)) << 32 | UInt64(UInt32(device.gateway))))
      fragment.removeAll(keepingCapacity: true)
      fragment += #"{"user":"#.utf8
      fragment += userJSON[Int(device.user)]
      fragment += #","device":"#.utf8
      JSONText.appendDecimal(device.id, to: &fragment)
      fragment += #","token":"#.utf8
      fragment += tokens[d]
      fragment.withUnsafeBytes { deviceJSON.append($0) }
    }
    info.devicesPerGateway = (0..<gateways.count).compactMap {
      devicesPerGateway[$0] > 0 ? (gateways[$0], devicesPerGateway[$0]) : nil
    }

    // Categories.
    var categoryGatewayMandatory = [Bool](
      repeating: false, count: categories.count * gateways.count)
    for (c, g) in categoryGateways {
      categoryGatewayMandatory[Int(c) * gateways.count + Int(gatewayRenumber[Int(g)])] = true
    }
    let prefRows = categoryPrefRows.map { row in
      (
        row.user, row.category, row.gateway < 0 ? Int32(-1) : gatewayRenumber[Int(row.gateway)],
        row.pref
      )
    }.sorted { ($0.0, $0.1, $0.2) < ($1.0, $1.1, $1.2) }
    var userCategoryPrefs = [Int32](repeating: 0, count: userCount + 1)
    for row in prefRows { userCategoryPrefs[Int(row.0) + 1] += 1 }
    for u in 0..<userCount { userCategoryPrefs[u + 1] += userCategoryPrefs[u] }

    // DND: weekly windows replace the daily window; equal schedules share a pattern.
    var patternIDs: [DNDPattern: Int32] = [:]
    // Most schedules are a daily window: each distinct one is built and hashed once.
    var dailyIDs: [Int: Int32] = [:]  // start << 11 | end
    var dndWords: [UInt64] = []
    var userDND = [Int32](repeating: -1, count: userCount)
    var weeklyPatterns: [Int32: DNDPattern] = [:]
    for w in weekly {
      weeklyPatterns[w.user, default: DNDPattern()].addWeekly(
        weekday: w.weekday, start: w.start, end: w.end)
    }
    for u in 0..<userCount {
      var pattern: DNDPattern
      var dailyKey: Int? = nil
      if let weeklyPattern = weeklyPatterns[Int32(u)] {
        pattern = weeklyPattern
      } else if let daily = dailyDND[u] {
        let key = daily.start << 11 | daily.end
        if let id = dailyIDs[key] {
          userDND[u] = id
          continue
        }
        dailyKey = key
        pattern = DNDPattern()
        pattern.addDaily(start: daily.start, end: daily.end)
      } else {
        continue
      }
      let id: Int32
      if let existing = patternIDs[pattern] {
        id = existing
      } else {
        id = Int32(patternIDs.count)
        patternIDs[pattern] = id
        dndWords += pattern.words
      }
      userDND[u] = id
      if let dailyKey { dailyIDs[dailyKey] = id }
    }
    info.dndPatterns = patternIDs.count

    var slots = pendingSlots.take()
    info.snoozeGroups = slots.snoozeGroupCount

    let index = Index(
      users: users, userJSON: userJSON, userZone: Column(userZone), userDND: Column(userDND),
      userDevices: Column(userDevices),
      userCategoryPrefs: Column(userCategoryPrefs), deviceIDs: Column(deviceIDs),
      deviceGateway: Column(deviceGateway),
      deviceRestricted: Column(deviceRestricted), deviceJSON: deviceJSON, channels: channels,
      channelScope: channelScope, channelMembers: Column(taking: &slots.channelMembers),
      memberUser: slots.memberUser,
      memberSettings: slots.memberSettings, memberSnooze: slots.memberSnooze,
      snoozeGroups: Column(taking: &slots.snoozeGroups),
      snoozeBounds: Column(taking: &slots.snoozeBounds),
      dndWords: Column(dndWords),
      zones: zones, gateways: gateways,
      gatewayJSON: gatewayJSON,
      categories: categories, categoryMandatory: Column(categoryMandatory),
      categoryDefault: Column(categoryDefault),
      categoryGatewayMandatory: Column(categoryGatewayMandatory),
      categoryPrefCategory: Column(prefRows.map { $0.1 }),
      categoryPrefGateway: Column(prefRows.map { $0.2 }),
      categoryPref: Column(prefRows.map { $0.3 }),
      settings: settings, declaredMemberCount: channelMemberCount,
      mutedBy: MutedBy(users: userCount, mutes: mutes),
      threadPrefs: ThreadPrefs(threads: threadIDs, rows: threadPrefRows),
      presence: PresenceWindows(users: userCount, rows: presence), userDefers: userDefers)
    index.checkInvariants()
    return Snapshot(index: index, info: info)
  }
}
