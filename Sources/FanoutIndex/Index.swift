import Dispatch
import FanoutModel
import FanoutTime

/// FanoutIndex owns the immutable, columnar form of a preferences snapshot
/// that the kernel evaluates against. Every entity has a dense `Int32` row;
/// users are numbered in user_id byte order, so walking a channel's members in
/// row order is walking them in output order. One-to-many data is CSR
/// (`offsets` + flat `values`). Everything that does not depend on the message
/// is resolved at load time: each membership slot carries its member's
/// resolved levels and flags, and the snooze windows that apply to it.

/// A member's settings for one channel, resolved through channel → scope →
/// user → settings → contract default, packed into one byte. The low six
/// bits are what the rules read (`ruleBits`). A chat level the member set
/// at none of their own levels is left to the channel
/// (`channelDefaultChat`): the defaults by size and kind are the channel's,
/// resolved per message, so that a what-if of other defaults shares the
/// slots.
public struct MemberSettings: Sendable, Equatable, BitwiseCopyable {
  public var raw: UInt8

  public init(raw: UInt8) { self.raw = raw }

  public init(
    chatLevel: Level, callLevel: Level, mentionNotifications: Bool, pinnedNotifications: Bool,
    mentionAllNotifications: Bool, showPreview: Bool
  ) {
    raw =
      chatLevel.rawValue | (callLevel == .all ? 0 : 1 << 2) | (mentionNotifications ? 1 << 3 : 0)
      | (pinnedNotifications ? 1 << 4 : 0) | (mentionAllNotifications ? 1 << 5 : 0)
      | (showPreview ? 1 << 6 : 0)
  }

  /// The bits the rule chain reads: chat level, calls, mention, pinned and
  /// @all notifications. (Preview and the snooze mark only shape output.)
  public static let ruleBits: UInt8 = 0x3F

  /// The chat level bits of a member who set none of their own: the
  /// channel's default applies (`Index.channelDefaultChat`).
  public static let channelDefaultChat: UInt8 = 3

  /// Whether the chat level is the channel's default.
  @inlinable public var hasChannelDefaultChat: Bool { raw & 3 == Self.channelDefaultChat }

  /// These settings with a chat level left to the channel set to its
  /// default, `level`.
  @inlinable public func resolvingChannelDefault(_ level: Level) -> MemberSettings {
    hasChannelDefaultChat ? MemberSettings(raw: raw & ~3 | level.rawValue) : self
  }

  /// The chat level, once the channel's default is resolved
  /// (`resolvingChannelDefault`).
  @inlinable public var chatLevel: Level { Level(rawValue: raw & 3)! }
  @inlinable public var callsOn: Bool { raw & (1 << 2) == 0 }
  @inlinable public var mentionNotifications: Bool { raw & (1 << 3) != 0 }
  @inlinable public var pinnedNotifications: Bool { raw & (1 << 4) != 0 }
  @inlinable public var mentionAllNotifications: Bool { raw & (1 << 5) != 0 }
  @inlinable public var showPreview: Bool { raw & (1 << 6) != 0 }
  @inlinable public var callLevel: Level { callsOn ? .all : .none }

  /// These settings with the chat level replaced (a thread's preference).
  @inlinable public func with(chatLevel: Level) -> MemberSettings {
    MemberSettings(raw: raw & ~3 | chatLevel.rawValue)
  }

  /// Whether the slot has a snooze group (`Index.memberSnooze` ≥ 0): most
  /// have none, and the evaluator then skips reading that column.
  @inlinable public var hasSnooze: Bool { raw & (1 << 7) != 0 }

  /// These settings, marked as belonging to a slot with a snooze group.
  public func withSnooze() -> MemberSettings { MemberSettings(raw: raw | 1 << 7) }
}

/// The whole snapshot, ready for evaluation. Shared read-only between workers.
public final class Index: Sendable {
  // Users, in user_id byte order.
  public let users: StringTable
  /// Each user's id as a JSON string literal.
  package let userJSON: BytePool
  /// Index into `zones` of each user's time zone.
  package let userZone: Column<UInt16>
  /// Index into the DND patterns of each user's schedule, or -1 for none.
  package let userDND: Column<Int32>
  /// CSR: user → devices, ordered by device_id.
  package let userDevices: Column<Int32>
  /// CSR: user → category preference rows, ordered by category then gateway.
  package let userCategoryPrefs: Column<Int32>
  /// Per user, the columns above (but the JSON) in one record for the kernel.
  package let userState: Column<UserState>

  // Devices, grouped by user.
  public let deviceIDs: Column<Int64>
  package let deviceGateway: Column<UInt16>
  /// 1 where the device's user is restricted on the device's gateway.
  package let deviceRestricted: Column<Bool>
  /// Each device as `{"user":…,"device":…,"token":…` (unclosed).
  package let deviceJSON: BytePool

  // Channels, in channel_id byte order.
  public let channels: StringTable
  package let channelScope: [Scope]
  /// CSR: channel → membership slots, ordered by user row.
  @usableFromInline package let channelMembers: Column<Int>
  package let memberUser: Column<Int32>
  package let memberSettings: Column<MemberSettings>
  /// Index into the snooze groups of each slot, or -1 when no window applies.
  package let memberSnooze: Column<Int32>

  /// CSR: snooze group → `[start, until)` pairs, flattened (`2 * i`, `2 * i + 1`).
  package let snoozeGroups: Column<Int32>
  package let snoozeBounds: Column<Int64>

  /// Minute-of-week bitsets, `DNDPattern.wordCount` words each.
  package let dndWords: Column<UInt64>
  public let zones: [ZoneTable]

  public let gateways: StringTable
  package let gatewayJSON: BytePool

  public let categories: StringTable
  package let categoryMandatory: Column<Bool>
  package let categoryDefault: Column<Preference>
  /// `categories.count × gateways.count`: gateway mandatory in category.
  package let categoryGatewayMandatory: Column<Bool>
  package let categoryPrefCategory: Column<Int32>
  /// Gateway of a category preference row, or -1 for the whole category.
  package let categoryPrefGateway: Column<Int32>
  package let categoryPref: Column<Preference>

  // Contract v2.
  /// The settings table.
  public let settings: AppSettings
  /// Per channel: `channels.member_count`, or -1 where NULL; empty when
  /// the snapshot has no such column (see `channelSize(_:)`).
  package let declaredMemberCount: [Int64]
  /// Per channel: the chat level of a member who set none at their own
  /// levels (`MemberSettings.channelDefaultChat`), from the settings, the
  /// channel's kind and size (`AppSettings.defaultChatLevel(scope:members:)`).
  public let channelDefaultChat: Column<Level>
  public let mutedBy: MutedBy
  public let threadPrefs: ThreadPrefs
  public let presence: PresenceWindows
  /// Per user: `users.quiet_action`, nil where NULL (the settings' default
  /// applies). Kept as read, so that an index with other settings
  /// (`replacing(settings:)`) applies its own default.
  public let userQuietActions: [QuietAction?]
  /// Per user: snooze and DND defer rather than drop (quiet action 'defer').
  public let userDefers: [Bool]
  /// Whether any user defers.
  public let anyUserDefers: Bool
  /// The index whose columns this one's are, every one (made from it by
  /// `replacing(settings:)` with no other part), if any.
  private let columnsOrigin: Index?
  /// The index whose columns this one's are, all but the users' times
  /// (`UserTimes`: made from it by `replacing(settings:userTimes:)` with
  /// no other part), if any.
  private let columnsBesideTimesOrigin: Index?

  package init(
    users: StringTable, userJSON: BytePool, userZone: Column<UInt16>, userDND: Column<Int32>,
    userDevices: Column<Int32>, userCategoryPrefs: Column<Int32>, deviceIDs: Column<Int64>,
    deviceGateway: Column<UInt16>,
    deviceRestricted: Column<Bool>, deviceJSON: BytePool, channels: StringTable,
    channelScope: [Scope], channelMembers: Column<Int>, memberUser: Column<Int32>,
    memberSettings: Column<MemberSettings>,
    memberSnooze: Column<Int32>, snoozeGroups: Column<Int32>, snoozeBounds: Column<Int64>,
    dndWords: Column<UInt64>,
    zones: [ZoneTable], gateways: StringTable, gatewayJSON: BytePool, categories: StringTable,
    categoryMandatory: Column<Bool>, categoryDefault: Column<Preference>,
    categoryGatewayMandatory: Column<Bool>,
    categoryPrefCategory: Column<Int32>, categoryPrefGateway: Column<Int32>,
    categoryPref: Column<Preference>,
    settings: AppSettings, declaredMemberCount: [Int64], mutedBy: MutedBy, threadPrefs: ThreadPrefs,
    presence: PresenceWindows, userQuietActions: [QuietAction?], columnsOrigin: Index? = nil,
    columnsBesideTimesOrigin: Index? = nil, derivedAlike: DerivedColumns? = nil
  ) {
    self.columnsOrigin = columnsOrigin
    self.columnsBesideTimesOrigin = columnsBesideTimesOrigin
    self.users = users
    self.userJSON = userJSON
    self.userZone = userZone
    self.userDND = userDND
    self.userDevices = userDevices
    self.userCategoryPrefs = userCategoryPrefs
    self.deviceIDs = deviceIDs
    self.deviceGateway = deviceGateway
    self.deviceRestricted = deviceRestricted
    self.deviceJSON = deviceJSON
    self.channels = channels
    self.channelScope = channelScope
    self.channelMembers = channelMembers
    self.memberUser = memberUser
    self.memberSettings = memberSettings
    self.memberSnooze = memberSnooze
    self.snoozeGroups = snoozeGroups
    self.snoozeBounds = snoozeBounds
    self.dndWords = dndWords
    self.zones = zones
    self.gateways = gateways
    self.gatewayJSON = gatewayJSON
    self.categories = categories
    self.categoryMandatory = categoryMandatory
    self.categoryDefault = categoryDefault
    self.categoryGatewayMandatory = categoryGatewayMandatory
    self.categoryPrefCategory = categoryPrefCategory
    self.categoryPrefGateway = categoryPrefGateway
    self.categoryPref = categoryPref
    self.settings = settings
    self.declaredMemberCount = declaredMemberCount
    channelDefaultChat =
      derivedAlike?.channelDefaultChat
      ?? Column(
        Self.defaultChatLevels(
          settings, scopes: channelScope, starts: channelMembers, declared: declaredMemberCount))
    self.mutedBy = mutedBy
    self.threadPrefs = threadPrefs
    self.presence = presence
    self.userQuietActions = userQuietActions
    if let users = derivedAlike?.users {
      (userState, userDefers, anyUserDefers) = (
        users.userState, users.userDefers, users.anyUserDefers
      )
      return
    }
    let userDefers = userQuietActions.map { ($0 ?? settings.defaultQuietAction) == .defer }
    self.userDefers = userDefers
    anyUserDefers = userDefers.contains(true)
    let count = userDND.count
    // On two cores for many users: a cached `explain` waits for it.
    let parts = count >= 1 << 16 ? 2 : 1
    let states = [UserState](unsafeUninitializedCapacity: count) { buffer, initialized in
      // (Each iteration initializes its own range only.)
      nonisolated(unsafe) let states = buffer
      DispatchQueue.concurrentPerform(iterations: parts) { part in
        for u in (count * part / parts)..<(count * (part + 1) / parts) {
          let devices = Int(userDevices[u])..<Int(userDevices[u + 1])
          let hasCategoryPrefs = userCategoryPrefs[u + 1] > userCategoryPrefs[u]
          (states.baseAddress! + u).initialize(
            to: UserState(
              dnd: userDND[u], zone: userZone[u], hasCategoryPrefs: hasCategoryPrefs,
              defers: userDefers[u], hasPresence: presence.hasWindows(user: u),
              devices: devices, deviceGateway: deviceGateway, deviceRestricted: deviceRestricted
            ))
        }
      }
      initialized = count
    }
    userState = Column(states)
  }

  /// Columns an index derives from others, taken from the index it
  /// replaces (`replacing`) where what they derive from is unchanged: each
  /// is a pass over 6.6M channels or 1M users at 1M users, for every B of
  /// a what-if.
  package struct DerivedColumns {
    var channelDefaultChat: Column<Level>?
    /// The users' records and quiet actions, taken whole.
    var users: Index?
  }

  /// What a user's row sets besides the levels the membership slots
  /// resolve: time zone, DND schedule, quiet action.
  package struct UserTimes {
    package var zones: [ZoneTable]
    package var userZone: Column<UInt16>
    package var userDND: Column<Int32>
    package var dndWords: Column<UInt64>
    package var userQuietActions: [QuietAction?]

    package init(
      zones: [ZoneTable], userZone: Column<UInt16>, userDND: Column<Int32>,
      dndWords: Column<UInt64>, userQuietActions: [QuietAction?]
    ) {
      (self.zones, self.userZone, self.userDND) = (zones, userZone, userDND)
      (self.dndWords, self.userQuietActions) = (dndWords, userQuietActions)
    }
  }

  /// Users' `category_prefs` rows, grouped by user: user `u`'s are
  /// `userCategoryPrefs[u]..<userCategoryPrefs[u + 1]`, by category, then
  /// gateway (−1, the whole category, first).
  package struct CategoryPrefs {
    package var userCategoryPrefs: Column<Int32>
    package var category: Column<Int32>
    package var gateway: Column<Int32>
    package var pref: Column<Preference>

    package init(
      userCategoryPrefs: Column<Int32>, category: Column<Int32>, gateway: Column<Int32>,
      pref: Column<Preference>
    ) {
      (self.userCategoryPrefs, self.category) = (userCategoryPrefs, category)
      (self.gateway, self.pref) = (gateway, pref)
    }

    /// Built from rows in any order; `gateway` is a gateway row of the
    /// index, or −1.
    package init(
      users: Int, rows: [(user: Int32, category: Int32, gateway: Int32, pref: Preference)]
    ) {
      let sorted = rows.sorted {
        ($0.user, $0.category, $0.gateway) < ($1.user, $1.category, $1.gateway)
      }
      var starts = [Int32](repeating: 0, count: users + 1)
      for row in sorted { starts[Int(row.user) + 1] += 1 }
      for u in 0..<users { starts[u + 1] += starts[u] }
      userCategoryPrefs = Column(starts)
      category = Column(sorted.map(\.category))
      gateway = Column(sorted.map(\.gateway))
      pref = Column(sorted.map(\.pref))
    }
  }

  /// Each channel's default chat level (`channelDefaultChat`): one per
  /// kind for small channels and one for large, 6.6M channels at 1M users.
  private static func defaultChatLevels(
    _ settings: AppSettings, scopes: [Scope], starts: Column<Int>, declared: [Int64]
  ) -> [Level] {
    let small = Scope.allCases.map { settings.defaultChatLevel(scope: $0, members: 0) }
    guard settings.largeChannel != nil else { return scopes.map { small[Int($0.rawValue)] } }
    let large = Scope.allCases.map { settings.defaultChatLevel(scope: $0, members: .max) }
    return scopes.indices.map { c in
      let size = channelSize(c, starts: starts, declared: declared)
      return (settings.isLarge(members: size) ? large : small)[Int(scopes[c].rawValue)]
    }
  }

  /// The membership slots: each channel's members (`channelMembers`,
  /// `memberUser`), their settings and snooze windows
  /// (`replacing(…slots:)`).
  package struct Slots {
    package var channelMembers: Column<Int>
    package var memberUser: Column<Int32>
    package var memberSettings: Column<MemberSettings>
    package var memberSnooze: Column<Int32>
    package var snoozeGroups: Column<Int32>
    package var snoozeBounds: Column<Int64>

    package init(
      channelMembers: Column<Int>, memberUser: Column<Int32>,
      memberSettings: Column<MemberSettings>, memberSnooze: Column<Int32>,
      snoozeGroups: Column<Int32>, snoozeBounds: Column<Int64>
    ) {
      (self.channelMembers, self.memberUser) = (channelMembers, memberUser)
      (self.memberSettings, self.memberSnooze) = (memberSettings, memberSnooze)
      (self.snoozeGroups, self.snoozeBounds) = (snoozeGroups, snoozeBounds)
    }
  }

  /// The gateways, in name order, and the columns numbering them besides
  /// the devices' (`replacing(…gateways:)`).
  package struct GatewayColumns {
    package var gateways: StringTable
    package var gatewayJSON: BytePool
    package var categoryGatewayMandatory: Column<Bool>
    package var categoryPrefs: CategoryPrefs

    package init(
      gateways: StringTable, gatewayJSON: BytePool, categoryGatewayMandatory: Column<Bool>,
      categoryPrefs: CategoryPrefs
    ) {
      (self.gateways, self.gatewayJSON) = (gateways, gatewayJSON)
      (self.categoryGatewayMandatory, self.categoryPrefs) = (
        categoryGatewayMandatory, categoryPrefs
      )
    }
  }

  /// The users' devices, grouped by user (`userDevices`), for this
  /// index's users and gateways (`replacing(…devices:)`).
  package struct DeviceColumns {
    package var userDevices: Column<Int32>
    package var deviceIDs: Column<Int64>
    package var deviceGateway: Column<UInt16>
    package var deviceRestricted: Column<Bool>
    package var deviceJSON: BytePool

    package init(
      userDevices: Column<Int32>, deviceIDs: Column<Int64>, deviceGateway: Column<UInt16>,
      deviceRestricted: Column<Bool>, deviceJSON: BytePool
    ) {
      (self.userDevices, self.deviceIDs, self.deviceGateway) = (
        userDevices, deviceIDs, deviceGateway
      )
      (self.deviceRestricted, self.deviceJSON) = (deviceRestricted, deviceJSON)
    }
  }

  /// Per channel: its kind, and its declared member count (-1: none).
  package struct ChannelColumns {
    package var scope: [Scope]
    package var declaredMemberCount: [Int64]

    package init(scope: [Scope], declaredMemberCount: [Int64]) {
      (self.scope, self.declaredMemberCount) = (scope, declaredMemberCount)
    }
  }

  /// Per category: whether it is mandatory, and its default preference.
  package struct CategoryColumns {
    package var mandatory: Column<Bool>
    package var defaults: Column<Preference>

    package init(mandatory: Column<Bool>, defaults: Column<Preference>) {
      (self.mandatory, self.defaults) = (mandatory, defaults)
    }
  }

  /// This index's membership slots, devices and gateways, as `replacing`
  /// takes them.
  package var slots: Slots {
    Slots(
      channelMembers: channelMembers, memberUser: memberUser, memberSettings: memberSettings,
      memberSnooze: memberSnooze, snoozeGroups: snoozeGroups, snoozeBounds: snoozeBounds)
  }

  package var devices: DeviceColumns {
    DeviceColumns(
      userDevices: userDevices, deviceIDs: deviceIDs, deviceGateway: deviceGateway,
      deviceRestricted: deviceRestricted, deviceJSON: deviceJSON)
  }

  package var gatewayColumns: GatewayColumns {
    GatewayColumns(
      gateways: gateways, gatewayJSON: gatewayJSON,
      categoryGatewayMandatory: categoryGatewayMandatory,
      categoryPrefs: CategoryPrefs(
        userCategoryPrefs: userCategoryPrefs, category: categoryPrefCategory,
        gateway: categoryPrefGateway, pref: categoryPref))
  }

  /// This index under other settings, and with other `userTimes`,
  /// `gateways` (with the category preferences), `devices`, membership
  /// `slots`, `categoryColumns`, `mutedBy`, `threadPrefs`, `presence` and
  /// `channelColumns` (with `slots`) if given: every other column shared,
  /// the users' quiet actions and the channels' default chat levels
  /// following the new settings. Without `slots`, only
  /// for settings with this index's call default
  /// (`AppSettings.sameSlotDefaults(as:)`): the slots resolve the call
  /// level down to it.
  package func replacing(
    settings: AppSettings, userTimes: UserTimes? = nil, gateways: GatewayColumns? = nil,
    devices: DeviceColumns? = nil, slots: Slots? = nil,
    categoryColumns: CategoryColumns? = nil, mutedBy: MutedBy? = nil,
    threadPrefs: ThreadPrefs? = nil, presence: PresenceWindows? = nil,
    channelColumns: ChannelColumns? = nil
  ) -> Index {
    precondition(slots != nil || settings.sameSlotDefaults(as: self.settings))
    // (A channel's kind places its members' scope preferences.)
    precondition(channelColumns == nil || slots != nil)
    let timesOnly =
      gateways == nil && devices == nil && slots == nil && categoryColumns == nil
      && mutedBy == nil && threadPrefs == nil && presence == nil
    let settingsOnly = timesOnly && userTimes == nil
    let times =
      userTimes
      ?? UserTimes(
        zones: zones, userZone: userZone, userDND: userDND, dndWords: dndWords,
        userQuietActions: userQuietActions)
    let derived = DerivedColumns(
      channelDefaultChat: slots == nil && settings.sameChannelDefaults(as: self.settings)
        ? channelDefaultChat : nil,
      // The records read the times, devices, category preferences, presence
      // and quiet actions; only the default quiet action of the settings.
      users: userTimes == nil && devices == nil && gateways == nil && presence == nil
        && settings.defaultQuietAction == self.settings.defaultQuietAction ? self : nil)
    let devices = devices ?? self.devices
    let slots = slots ?? self.slots
    let gateways = gateways ?? gatewayColumns
    let prefs = gateways.categoryPrefs
    return Index(
      users: users, userJSON: userJSON, userZone: times.userZone, userDND: times.userDND,
      userDevices: devices.userDevices, userCategoryPrefs: prefs.userCategoryPrefs,
      deviceIDs: devices.deviceIDs, deviceGateway: devices.deviceGateway,
      deviceRestricted: devices.deviceRestricted, deviceJSON: devices.deviceJSON,
      channels: channels, channelScope: channelColumns?.scope ?? channelScope,
      channelMembers: slots.channelMembers,
      memberUser: slots.memberUser, memberSettings: slots.memberSettings,
      memberSnooze: slots.memberSnooze, snoozeGroups: slots.snoozeGroups,
      snoozeBounds: slots.snoozeBounds, dndWords: times.dndWords,
      zones: times.zones, gateways: gateways.gateways, gatewayJSON: gateways.gatewayJSON,
      categories: categories,
      categoryMandatory: categoryColumns?.mandatory ?? categoryMandatory,
      categoryDefault: categoryColumns?.defaults ?? categoryDefault,
      categoryGatewayMandatory: gateways.categoryGatewayMandatory,
      categoryPrefCategory: prefs.category, categoryPrefGateway: prefs.gateway,
      categoryPref: prefs.pref, settings: settings,
      declaredMemberCount: channelColumns?.declaredMemberCount ?? declaredMemberCount,
      mutedBy: mutedBy ?? self.mutedBy, threadPrefs: threadPrefs ?? self.threadPrefs,
      presence: presence ?? self.presence, userQuietActions: times.userQuietActions,
      columnsOrigin: settingsOnly ? columnsOrigin ?? self : nil,
      columnsBesideTimesOrigin: timesOnly ? columnsBesideTimesOrigin ?? self : nil,
      derivedAlike: derived)
  }

  /// Whether rules 0–7 decide every pair against `other` as against this
  /// index: both have the same columns (one made from the other, or both
  /// from a third, by `replacing(settings:)` alone) and the same settings
  /// but for those only the ledgers read (rule 8's throttle, contract v3's
  /// notification groups). A what-if side that changes only those takes
  /// A's evaluation before its ledgers as its own.
  public func decidesAlikeBeforeLedgers(_ other: Index) -> Bool {
    guard sharesColumns(with: other) else { return false }
    var settings = other.settings
    settings.throttle = self.settings.throttle
    settings.notificationGroups = self.settings.notificationGroups
    return settings == self.settings
  }

  /// Whether the rules decide every pair against this index as against
  /// `other`, but where a user this index defers (quiet action 'defer')
  /// had `other` drop the pair in quiet time: both have the same columns
  /// (`decidesAlikeBeforeLedgers`) and the same settings but the default
  /// quiet action, `other` defers no one this index does not, and neither
  /// has ledgers. A what-if side so made from A decides again only the
  /// pairs A dropped as snoozed or dnd (`Evaluator.redecideQuietPairs`).
  public func defersMoreThan(_ other: Index) -> Bool {
    guard sharesColumns(with: other), settings.throttle == nil,
      settings.notificationGroups == nil,
      other.settings.defaultQuietAction != .defer || settings.defaultQuietAction == .defer
    else { return false }
    var settings = other.settings
    settings.defaultQuietAction = self.settings.defaultQuietAction
    return settings == self.settings
  }

  /// Whether the rules decide every pair against this index as against
  /// `other` but through its user's quiet hours (DND schedule, quiet
  /// action): both have the same columns but those (one made from the
  /// other, or both from a third, by `replacing(settings:userTimes:)`
  /// alone), the same settings and users' time zones, and neither has
  /// ledgers. A what-if side so made from A decides again only the pairs
  /// whose quiet hours differ at their message's instant
  /// (`Evaluator.redecideQuietHours`).
  public func differsOnlyInQuietHours(from other: Index) -> Bool {
    (columnsBesideTimesOrigin ?? self) === (other.columnsBesideTimesOrigin ?? other)
      && settings == other.settings && settings.throttle == nil
      && settings.notificationGroups == nil && zones.map(\.name) == other.zones.map(\.name)
      && userZone.elementsEqual(other.userZone)
  }

  /// Whether this index and `other` have the same columns: one made from
  /// the other, or both from a third, by `replacing(settings:)` alone.
  private func sharesColumns(with other: Index) -> Bool {
    (columnsOrigin ?? self) === (other.columnsOrigin ?? other)
  }

  public var memberCount: Int { memberUser.count }
  public var deviceCount: Int { deviceIDs.count }

  /// The members of `channel`, as user rows in output order.
  public func members(of channel: Int32) -> Slice<Column<Int32>> {
    memberUser[channelMembers[Int(channel)]..<channelMembers[Int(channel) + 1]]
  }

  /// The channel row whose members include member slot `slot`.
  public func channel(ofMemberSlot slot: Int) -> Int {
    // The last channel whose first slot is at or before `slot`.
    var low = 0
    var high = channels.count
    while high - low > 1 {
      let mid = (low + high) / 2
      if channelMembers[mid] <= slot { low = mid } else { high = mid }
    }
    return low
  }

  /// The member slot of user row `user` in `channel`, if a member.
  public func memberSlot(user: Int32, channel: Int) -> Int? {
    var low = channelMembers[channel]
    var high = channelMembers[channel + 1]
    while low < high {
      let mid = (low + high) / 2
      if memberUser[mid] < user { low = mid + 1 } else { high = mid }
    }
    return low < channelMembers[channel + 1] && memberUser[low] == user ? low : nil
  }

  /// The number of members of `channel`. (Inlined: the what-if loops ask
  /// it once per message and side.)
  @inlinable public func memberCount(of channel: Int) -> Int {
    let starts = channelMembers.buffer
    return starts[channel + 1] - starts[channel]
  }

  /// The number of members of `channel` for the size rules:
  /// `channels.member_count` where set, else its rows in `members`.
  public func channelSize(_ channel: Int) -> Int64 {
    Self.channelSize(channel, starts: channelMembers, declared: declaredMemberCount)
  }

  private static func channelSize(_ c: Int, starts: Column<Int>, declared: [Int64]) -> Int64 {
    let given = declared.isEmpty ? -1 : declared[c]
    return given >= 0 ? given : Int64(starts[c + 1] - starts[c])
  }

  /// Whether `mention_all` counts in `channel` (`mention_all_max_members`).
  public func mentionAllApplies(in channel: Int) -> Bool {
    settings.mentionAllApplies(members: channelSize(channel))
  }

  /// The time zone of user row `u`.
  public func zone(ofUser u: Int) -> ZoneTable { zones[Int(userZone[u])] }

  /// The row in `zones` of user row `u`'s time zone.
  public func zoneRow(ofUser u: Int) -> Int { Int(userZone[u]) }
}

extension Index {
  /// Whether category `name` is mandatory, and the gateways mandatory in
  /// it (in byte order); nil for a category the snapshot does not have.
  public func categoryMandates(_ name: String) -> (mandatory: Bool, gateways: [String])? {
    guard let c = categories.find(name).map(Int.init) else { return nil }
    let mandatoryGateways = (0..<gateways.count).filter {
      categoryGatewayMandatory[c * gateways.count + $0]
    }.map { gateways[$0] }
    return (
      categoryMandatory[c], mandatoryGateways.sorted { $0.utf8.lexicographicallyPrecedes($1.utf8) }
    )
  }
}
