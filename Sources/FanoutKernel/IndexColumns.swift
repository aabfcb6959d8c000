import FanoutIndex
import FanoutModel

/// Raw views of the index columns the rule chain reads, so that the loop
/// pays no retain, bounds check or uniqueness check per pair.
///
/// Valid while the index lives: its columns keep their values in place
/// (`Column`). The evaluator holds both.
struct IndexColumns {
  let channelMembers: UnsafeBufferPointer<Int>
  let channelDefaultChat: UnsafeBufferPointer<Level>
  let memberUser: UnsafeBufferPointer<Int32>
  let memberSettings: UnsafeBufferPointer<MemberSettings>
  let memberSnooze: UnsafeBufferPointer<Int32>
  let snoozeGroups: UnsafeBufferPointer<Int32>
  let snoozeBounds: UnsafeBufferPointer<Int64>
  let userState: UnsafeBufferPointer<UserState>
  let dndWords: UnsafeBufferPointer<UInt64>
  let userDevices: UnsafeBufferPointer<Int32>
  let deviceGateway: UnsafeBufferPointer<UInt16>
  let deviceRestricted: UnsafeBufferPointer<Bool>
  let userCategoryPrefs: UnsafeBufferPointer<Int32>
  let categoryPrefCategory: UnsafeBufferPointer<Int32>
  let categoryPrefGateway: UnsafeBufferPointer<Int32>
  let categoryPref: UnsafeBufferPointer<Preference>
  let categoryMandatory: UnsafeBufferPointer<Bool>
  let categoryDefault: UnsafeBufferPointer<Preference>
  let categoryGatewayMandatory: UnsafeBufferPointer<Bool>
  /// `mutedBy`: per user row, where its muters start in `muters` (CSR).
  let muterOffsets: UnsafeBufferPointer<Int32>
  let muters: UnsafeBufferPointer<Int32>
  let threadUsers: UnsafeBufferPointer<Int32>
  let threadLevels: UnsafeBufferPointer<Level>
  let deviceJSON: BytePool.View
  let userJSON: BytePool.View
  let channelNames: BytePool.View

  /// The number of devices of user `u`, whose record is `state`.
  @inline(__always)
  func deviceCount(user u: Int, _ state: UserState) -> Int {
    state.hasInlineDevices
      ? state.inlineDeviceCount : Int(userDevices[u &+ 1]) &- Int(state.firstDevice)
  }

  /// The gateway row and restriction of the `k`-th device of the user whose
  /// record is `state`: from the record when inline, else from the device columns.
  @inline(__always)
  func deviceGate(_ k: Int, _ state: UserState) -> (gateway: Int, restricted: Bool) {
    if state.hasInlineDevices { return state.inlineGate(k) }
    let d = Int(state.firstDevice) &+ k
    return (Int(deviceGateway[d]), deviceRestricted[d])
  }

  init(_ index: Index) {
    channelMembers = index.channelMembers.buffer
    channelDefaultChat = index.channelDefaultChat.buffer
    memberUser = index.memberUser.buffer
    memberSettings = index.memberSettings.buffer
    memberSnooze = index.memberSnooze.buffer
    snoozeGroups = index.snoozeGroups.buffer
    snoozeBounds = index.snoozeBounds.buffer
    userState = index.userState.buffer
    dndWords = index.dndWords.buffer
    userDevices = index.userDevices.buffer
    deviceGateway = index.deviceGateway.buffer
    deviceRestricted = index.deviceRestricted.buffer
    userCategoryPrefs = index.userCategoryPrefs.buffer
    categoryPrefCategory = index.categoryPrefCategory.buffer
    categoryPrefGateway = index.categoryPrefGateway.buffer
    categoryPref = index.categoryPref.buffer
    categoryMandatory = index.categoryMandatory.buffer
    categoryDefault = index.categoryDefault.buffer
    categoryGatewayMandatory = index.categoryGatewayMandatory.buffer
    muterOffsets = index.mutedBy.offsets.buffer
    muters = index.mutedBy.muters.buffer
    threadUsers = index.threadPrefs.users.buffer
    threadLevels = index.threadPrefs.levels.buffer
    deviceJSON = index.deviceJSON.view
    userJSON = index.userJSON.view
    channelNames = index.channels.pool.view
  }
}

/// Per-evaluator scratch space and counters, in one owned allocation so the
/// loop can update them through pointers.
final class EvaluatorScratch {
  /// Per zone: the message number whose local minute-of-week is cached.
  let zoneStamp: UnsafeMutableBufferPointer<Int>
  let zoneMinute: UnsafeMutableBufferPointer<Int>
  /// Per zone: the span of instants sharing one UTC offset that the last
  /// lookup found, and that offset: messages come mostly in time order, so
  /// most lookups fall in it and skip the zone table's binary search.
  let zoneSpan: UnsafeMutableBufferPointer<(from: Int64, until: Int64, offset: Int32)>
  /// Per zone: the UTC minute (its first millisecond) whose steadiness is
  /// cached, and whether the zone's local minute holds all through it.
  let zoneSteadyMinute: UnsafeMutableBufferPointer<Int64>
  let zoneSteady: UnsafeMutableBufferPointer<Bool>
  /// Per gateway: the message number whose delivery line is open.
  let gatewayStamp: UnsafeMutableBufferPointer<Int>
  let deliveries: UnsafeMutableBufferPointer<Int>
  let blocked: UnsafeMutableBufferPointer<Int>
  let suppressed: UnsafeMutableBufferPointer<Int>
  /// With `.outcomes`: the current message's pairs, appended to the result
  /// at the message's end — one append per column and message, not four
  /// per pair (each checks its array's uniqueness and capacity).
  private(set) var messagePairCapacity = 0
  private(set) var messageUsers = UnsafeMutablePointer<Int32>.allocate(capacity: 0)
  private(set) var messageOutcomes = UnsafeMutablePointer<Outcome>.allocate(capacity: 0)
  private(set) var messageDeliveryHours = UnsafeMutablePointer<UInt8>.allocate(capacity: 0)
  private(set) var messageLocalHours = UnsafeMutablePointer<UInt8>.allocate(capacity: 0)

  init(zones: Int, gateways: Int) {
    func make(_ n: Int, _ value: Int) -> UnsafeMutableBufferPointer<Int> {
      let b = UnsafeMutableBufferPointer<Int>.allocate(capacity: max(1, n))
      b.initialize(repeating: value)
      return b
    }
    zoneStamp = make(zones, -1)
    zoneMinute = make(zones, 0)
    zoneSpan = .allocate(capacity: max(1, zones))
    zoneSpan.initialize(repeating: (.max, .min, 0))  // empty: the first lookup fills it
    zoneSteadyMinute = .allocate(capacity: max(1, zones))
    zoneSteadyMinute.initialize(repeating: .min)
    zoneSteady = .allocate(capacity: max(1, zones))
    zoneSteady.initialize(repeating: false)
    gatewayStamp = make(gateways, -1)
    deliveries = make(gateways, 0)
    blocked = make(gateways, 0)
    suppressed = make(Reason.allCases.count, 0)
  }

  deinit {
    for b in [zoneStamp, zoneMinute, gatewayStamp, deliveries, blocked, suppressed] {
      b.deallocate()
    }
    zoneSpan.deallocate()
    deallocateMessagePairs()
    zoneSteadyMinute.deallocate()
    zoneSteady.deallocate()
  }
}

extension EvaluatorScratch {
  /// Room for a message of `pairs` pairs in the message's pair buffers.
  @inline(__always)
  func reserveMessagePairs(_ pairs: Int) {
    if pairs > messagePairCapacity { growMessagePairs(pairs) }
  }

  @inline(never)
  private func growMessagePairs(_ pairs: Int) {
    deallocateMessagePairs()
    messagePairCapacity = max(pairs, 2 * messagePairCapacity)
    messageUsers = .allocate(capacity: messagePairCapacity)
    messageOutcomes = .allocate(capacity: messagePairCapacity)
    messageDeliveryHours = .allocate(capacity: messagePairCapacity)
    messageLocalHours = .allocate(capacity: messagePairCapacity)
  }

  private func deallocateMessagePairs() {
    messageUsers.deallocate()
    messageOutcomes.deallocate()
    messageDeliveryHours.deallocate()
    messageLocalHours.deallocate()
  }

  /// Appends the message's first `pairs` pairs to `result` (their local
  /// hours when `localHours`), then the message's end.
  func appendMessagePairs(_ pairs: Int, localHours: Bool, to result: inout ChunkResult) {
    result.pairUsers.append(contentsOf: UnsafeBufferPointer(start: messageUsers, count: pairs))
    result.pairOutcomes.append(
      contentsOf: UnsafeBufferPointer(start: messageOutcomes, count: pairs))
    result.pairDeliveryHours.append(
      contentsOf: UnsafeBufferPointer(start: messageDeliveryHours, count: pairs))
    if localHours {
      result.pairLocalHours.append(
        contentsOf: UnsafeBufferPointer(start: messageLocalHours, count: pairs))
    }
    result.messagePairEnds.append(Int32(result.pairUsers.count))
  }
}
