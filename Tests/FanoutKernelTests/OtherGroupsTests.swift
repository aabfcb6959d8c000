import Testing

@testable import FanoutKernel

@Suite("OtherGroups: a partition's mentions and calls groups by slot")
struct OtherGroupsTests {
  @Test("grown eleven times past its first size, each group is found by slot and type, no other")
  func growth() {
    var table = OtherGroups()
    // 600,001 groups: the first table holds 512 at half full.
    // Consecutive slots, as one channel's members have, and the largest slot.
    var made: [(slot: Int, type: UInt8, group: Int)] = []
    for k in 0..<300_000 {
      made.append((k, NotificationGroupType.mentions.rawValue, 2 * k))
      made.append((k * 7 + 1, NotificationGroupType.calls.rawValue, 2 * k + 1))
    }
    made.append((Int(Int32.max) - 1, NotificationGroupType.calls.rawValue, 600_000))
    for entry in made { table.insert(slot: entry.slot, type: entry.type, group: entry.group) }
    var wrong = 0
    for entry in made where table.find(slot: entry.slot, type: entry.type) != entry.group {
      wrong += 1
    }
    #expect(wrong == 0)
    // The same slots with the other type, and slots never used.
    #expect(table.find(slot: 2, type: NotificationGroupType.calls.rawValue) == nil)
    #expect(table.find(slot: 9, type: NotificationGroupType.calls.rawValue) == nil)
    #expect(table.find(slot: 300_000, type: NotificationGroupType.mentions.rawValue) == nil)
    #expect(
      table.find(slot: Int(Int32.max) - 1, type: NotificationGroupType.mentions.rawValue) == nil)
  }
}
