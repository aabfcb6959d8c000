import FanoutIndex
import FanoutSnapshot
import FanoutTestSupport
import Testing

@Suite("Index invariants")
struct IndexInvariantsTests {
  @Test("every index the loader builds keeps them; breaking one is reported")
  func invariants() throws {
    for seed in [1, 2, 3] as [UInt64] {
      let world = RandomWorld(seed: seed)
      let index = try SnapshotLoader.load(path: SQLiteFixture.make(world.sql)).index
      #expect(index.invariantViolations().isEmpty, "seed \(seed)")
    }
    // The same index with one channel's members out of order.
    let sql =
      SQLiteFixture.header + """
        INSERT INTO users (user_id) VALUES ('a'), ('b'), ('c');
        INSERT INTO channels VALUES ('c1', 'group');
        INSERT INTO members VALUES ('c1', 'a'), ('c1', 'b'), ('c1', 'c');
        """
    let index = try SnapshotLoader.load(path: SQLiteFixture.make(sql)).index
    #expect(index.invariantViolations().isEmpty)
    let broken = index.replacingMembers(Array(index.members(of: 0).reversed()))
    #expect(
      broken.invariantViolations()
        == ["channel members 0: not in strictly increasing order at 1"])
    // A member's user row past the users (the row checks run without
    // branches first, then name the first culprit).
    #expect(
      index.replacingMembers([0, 1, 7]).invariantViolations()
        == ["memberUser 2: 7 is not a row below 3"])
    #expect(
      index.replacingMembers([-1, 1, 2]).invariantViolations().first
        == "memberUser 0: -1 is not a row below 3")
  }

  @Test("the suite runs with internal checks on (debug builds)")
  func checksOn() {
    #expect(Index.internalChecks)
  }
}

extension Index {
  /// This index with `memberUser` replaced (to break an invariant on purpose).
  fileprivate func replacingMembers(_ members: [Int32]) -> Index {
    Index(
      users: users, userJSON: userJSON, userZone: userZone, userDND: userDND,
      userDevices: userDevices, userCategoryPrefs: userCategoryPrefs, deviceIDs: deviceIDs,
      deviceGateway: deviceGateway, deviceRestricted: deviceRestricted, deviceJSON: deviceJSON,
      channels: channels, channelScope: channelScope, channelMembers: channelMembers,
      memberUser: Column(members), memberSettings: memberSettings, memberSnooze: memberSnooze,
      snoozeGroups: snoozeGroups, snoozeBounds: snoozeBounds, dndWords: dndWords, zones: zones,
      gateways: gateways, gatewayJSON: gatewayJSON, categories: categories,
      categoryMandatory: categoryMandatory, categoryDefault: categoryDefault,
      categoryGatewayMandatory: categoryGatewayMandatory,
      categoryPrefCategory: categoryPrefCategory, categoryPrefGateway: categoryPrefGateway,
      categoryPref: categoryPref, settings: settings, declaredMemberCount: declaredMemberCount,
      mutedBy: mutedBy,
      threadPrefs: threadPrefs, presence: presence,
      userQuietActions: userQuietActions)
  }
}
