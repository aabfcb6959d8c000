import CPrefetch
import FanoutIndex
import FanoutModel

/// One slot per membership, in member-key order (by channel, then user):
/// the user, the settings resolved channel → scope → user → settings table
/// → contract (a chat level set at none of these is the channel's default,
/// `MemberSettings.channelDefaultChat`), and the snooze group. The largest part of `build()`,
/// and independent of the rest, so it is built on a core of its own.
struct MembershipSlots: Sendable {
  var channelMembers: [Int]
  var memberUser: Column<Int32>
  var memberSettings: Column<MemberSettings>
  var memberSnooze: Column<Int32>
  var snoozeGroups: [Int32] = [0]
  var snoozeBounds: [Int64] = []
  var snoozeGroupCount = 0

  /// What the slots are built from: the validated rows of members, users,
  /// scope_prefs and channel_prefs.
  struct Rows: Sendable {
    var memberKeys: [UInt64]  // channel << 32 | user, sorted
    var channelScope: [Scope]
    var userPrefs: [LevelRow]
    var scopeRow: [Int32]  // user * 3 + scope -> scope_prefs row
    var scopePrefs: [LevelRow]
    var channelPrefKeys: [(key: UInt64, row: Int32)]  // sorted
    var channelPrefs: [LevelRow]
    /// The call level of a member who set none (settings, else 'all').
    var defaultCall: Level
  }

  /// A member's settings from the channel, scope and user rows, then the
  /// defaults; a chat level none of the rows sets is left to the channel.
  static func resolve(_ cp: LevelRow, _ sp: LevelRow, _ up: LevelRow, call: Level)
    -> MemberSettings
  {
    let chat = LevelRow.resolve(cp.chat, sp.chat, up.chat, MemberSettings.channelDefaultChat)
    let others = MemberSettings(
      chatLevel: .all,
      callLevel: Level(rawValue: LevelRow.resolve(cp.call, sp.call, up.call, call.rawValue))!,
      mentionNotifications: LevelRow.resolve(cp.mention, sp.mention, up.mention, 1) == 1,
      pinnedNotifications: LevelRow.resolve(cp.pinned, sp.pinned, up.pinned, 1) == 1,
      mentionAllNotifications: LevelRow.resolve(cp.mentionAll, sp.mentionAll, up.mentionAll, 1)
        == 1,
      showPreview: LevelRow.resolve(cp.preview, sp.preview, up.preview, 1) == 1)
    // Its chat bits: a level, or the channel's default.
    return MemberSettings(raw: others.raw & ~3 | chat)
  }

  init(_ rows: Rows) {
    let userCount = rows.userPrefs.count
    let slotCount = rows.memberKeys.count
    var channelStarts = [Int](repeating: 0, count: rows.channelScope.count + 1)
    // Most slots have no scope or channel row: their settings are the user's
    // own, resolved once per user into one byte (one cache line per 32
    // users), with `plain` set when the user has no scope rows and no snooze.
    let plain: UInt16 = 0x100
    var userBase = [UInt16](repeating: 0, count: userCount)
    for u in 0..<userCount {
      let up = rows.userPrefs[u]
      let isPlain = !up.hasSnooze && (0..<3).allSatisfy { rows.scopeRow[u * 3 + $0] < 0 }
      let own = Self.resolve(LevelRow.none, LevelRow.none, up, call: rows.defaultCall)
      userBase[u] = UInt16(own.raw) | (isPlain ? plain : 0)
    }
    var snoozeIDs: [SnoozeGroupKey: Int32] = [:]
    var groups: [Int32] = [0]
    var bounds: [Int64] = []
    // Columns from the start: the largest of the index, never copied.
    var settings = Column(repeating: MemberSettings(raw: 0), count: slotCount)
    var snooze = Column<Int32>(repeating: -1, count: slotCount)
    var users = Column<Int32>(repeating: 0, count: slotCount)
    let prefKeys = rows.channelPrefKeys
    var nextPref = 0
    // Where the user bytes and rows lie, to ask for them ahead (a hint
    // only: all reads go through the arrays), lent for the loop.
    userBase.withUnsafeBufferPointer { userBaseBuffer in
      rows.scopeRow.withUnsafeBufferPointer { scopeRowBuffer in
        rows.userPrefs.withUnsafeBufferPointer { userPrefsBuffer in
          let userBaseStart = userBaseBuffer.baseAddress
          let scopeRowStart = scopeRowBuffer.baseAddress
          let userPrefsStart = userPrefsBuffer.baseAddress
          // Flat buffers: 19M slots at 1M users, no per-append checks.
          rows.memberKeys.withUnsafeBufferPointer { keys in
            users.withUnsafeMutableBufferPointer { users in
              settings.withUnsafeMutableBufferPointer { settings in
                snooze.withUnsafeMutableBufferPointer { snooze in
                  channelStarts.withUnsafeMutableBufferPointer { channelMembers in
                    for (slot, key) in keys.enumerated() {
                      // Users come in no useful order: ask for a user's byte 16
                      // slots ahead and, 8 ahead, for the rows of one who is not plain.
                      if slot &+ 16 < keys.count, let userBaseStart {
                        cprefetch_read(
                          userBaseStart + Int(UInt32(truncatingIfNeeded: keys[slot &+ 16])))
                      }
                      if slot &+ 8 < keys.count, let scopeRowStart, let userPrefsStart {
                        let ahead = Int(UInt32(truncatingIfNeeded: keys[slot &+ 8]))
                        if userBase[ahead] & plain == 0 {
                          cprefetch_read(scopeRowStart + ahead &* 3)
                          cprefetch_read(userPrefsStart + ahead)
                        }
                      }
                      let c = Int(key >> 32)
                      let u = Int(UInt32(truncatingIfNeeded: key))
                      channelMembers[c + 1] += 1
                      users[slot] = Int32(u)
                      while nextPref < prefKeys.count && prefKeys[nextPref].key < key {
                        nextPref += 1
                      }
                      let cpRow =
                        nextPref < prefKeys.count && prefKeys[nextPref].key == key
                        ? Int(prefKeys[nextPref].row) : -1
                      if cpRow < 0 && userBase[u] & plain != 0 {
                        settings[slot] = MemberSettings(raw: UInt8(truncatingIfNeeded: userBase[u]))
                        continue
                      }
                      let spRow = Int(rows.scopeRow[u * 3 + Int(rows.channelScope[c].rawValue)])
                      let cp = cpRow >= 0 ? rows.channelPrefs[cpRow] : LevelRow.none
                      let sp = spRow >= 0 ? rows.scopePrefs[spRow] : LevelRow.none
                      let up = rows.userPrefs[u]
                      settings[slot] = Self.resolve(cp, sp, up, call: rows.defaultCall)

                      // Each level's snooze window stands alone; the windows add up.
                      guard up.hasSnooze || sp.hasSnooze || cp.hasSnooze else { continue }
                      settings[slot] = settings[slot].withSnooze()
                      let group = SnoozeGroupKey(user: up, scope: sp, channel: cp)
                      if let id = snoozeIDs[group] {
                        snooze[slot] = id
                      } else {
                        let id = Int32(snoozeIDs.count)
                        snoozeIDs[group] = id
                        bounds += group.windows
                        groups.append(Int32(bounds.count / 2))
                        snooze[slot] = id
                      }
                    }
                    for c in 0..<channelMembers.count - 1 {
                      channelMembers[c + 1] += channelMembers[c]
                    }
                  }
                }
              }
            }
          }
        }
      }
    }
    channelMembers = channelStarts
    memberUser = users
    memberSettings = settings
    memberSnooze = snooze
    snoozeGroups = groups
    snoozeBounds = bounds
    snoozeGroupCount = snoozeIDs.count
  }
}

extension MembershipSlots {
  /// The slots as the index's columns (the built arrays taken, not copied).
  mutating func columns() -> Index.Slots {
    Index.Slots(
      channelMembers: Column(taking: &channelMembers), memberUser: memberUser,
      memberSettings: memberSettings, memberSnooze: memberSnooze,
      snoozeGroups: Column(taking: &snoozeGroups), snoozeBounds: Column(taking: &snoozeBounds))
  }
}

/// The non-empty snooze windows that apply to one membership slot.
struct SnoozeGroupKey: Hashable {
  var windows: [Int64] = []
  init(user: LevelRow, scope: LevelRow, channel: LevelRow) {
    for level in [user, scope, channel] where level.hasSnooze {
      windows += [level.snoozeStart, level.snoozeUntil]
    }
  }
}
