import FanoutIndex
import FanoutModel

/// Raw views of the index columns the rule chain reads, so that the loop
/// pays no retain, bounds check or uniqueness check per pair.
///
/// Valid while the index lives: its columns keep their values in place
/// (`Column`). The evaluator holds both.
struct IndexColumns {
  let channelMembers: UnsafeBufferPointer<Int>
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
  /// Per zone: the UTC minute (its first millisecond) whose steadiness is
  /// cached, and whether the zone's local minute holds all through it.
  let zoneSteadyMinute: UnsafeMutableBufferPointer<Int64>
  let zoneSteady: UnsafeMutableBufferPointer<Bool>
  /// Per gateway: the message number whose delivery line is open.
  let gatewayStamp: UnsafeMutableBufferPointer<Int>
  let deliveries: UnsafeMutableBufferPointer<Int>
  let blocked: UnsafeMutableBufferPointer<Int>
  let suppressed: UnsafeMutableBufferPointer<Int>

  init(zones: Int, gateways: Int) {
    func make(_ n: Int, _ value: Int) -> UnsafeMutableBufferPointer<Int> {
      let b = UnsafeMutableBufferPointer<Int>.allocate(capacity: max(1, n))
      b.initialize(repeating: value)
      return b
    }
    zoneStamp = make(zones, -1)
    zoneMinute = make(zones, 0)
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
    zoneSteadyMinute.deallocate()
    zoneSteady.deallocate()
  }
}
