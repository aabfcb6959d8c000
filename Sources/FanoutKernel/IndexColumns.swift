import FanoutIndex
import FanoutModel

/// Raw views of the index columns the rule chain reads, lent for the length
/// of one closure (`lend`), so that the loop pays no retain, bounds check or
/// uniqueness check per pair. The views are valid only inside the closure
/// that received them, as with `withUnsafeBufferPointer`.
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
  let deviceJSON: PoolView
  let userJSON: PoolView
  let channelNames: PoolView

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

  /// A `BytePool` as raw bytes and offsets.
  struct PoolView {
    let bytes: UnsafeBufferPointer<UInt8>
    let offsets: UnsafeBufferPointer<Int>

    init(bytes: UnsafeBufferPointer<UInt8>, offsets: UnsafeBufferPointer<Int>) {
      self.bytes = bytes
      self.offsets = offsets
    }

    /// Lends `pool` as a view for the length of `body`.
    static func lend<R>(_ pool: BytePool, _ body: (PoolView) -> R) -> R {
      pool.bytes.withUnsafeBufferPointer { bytes in
        pool.offsets.withUnsafeBufferPointer { offsets in
          body(PoolView(bytes: bytes, offsets: offsets))
        }
      }
    }

    @inline(__always)
    subscript(i: Int) -> UnsafeBufferPointer<UInt8> {
      UnsafeBufferPointer(rebasing: bytes[offsets[i]..<offsets[i &+ 1]])
    }
  }

  /// Lends `index`'s columns for the length of `body`: every view is taken
  /// inside the `withUnsafeBufferPointer` of its array, and `body` runs
  /// inside all of them. Costs a few calls per lending, none per pair.
  static func lend<R>(_ index: Index, _ body: (IndexColumns) -> R) -> R {
    index.channelMembers.withUnsafeBufferPointer { channelMembers in
    index.memberUser.withUnsafeBufferPointer { memberUser in
    index.memberSettings.withUnsafeBufferPointer { memberSettings in
    index.memberSnooze.withUnsafeBufferPointer { memberSnooze in
    index.snoozeGroups.withUnsafeBufferPointer { snoozeGroups in
    index.snoozeBounds.withUnsafeBufferPointer { snoozeBounds in
    index.userState.withUnsafeBufferPointer { userState in
    index.dndWords.withUnsafeBufferPointer { dndWords in
    index.userDevices.withUnsafeBufferPointer { userDevices in
    index.deviceGateway.withUnsafeBufferPointer { deviceGateway in
    index.deviceRestricted.withUnsafeBufferPointer { deviceRestricted in
    index.userCategoryPrefs.withUnsafeBufferPointer { userCategoryPrefs in
    index.categoryPrefCategory.withUnsafeBufferPointer { categoryPrefCategory in
    index.categoryPrefGateway.withUnsafeBufferPointer { categoryPrefGateway in
    index.categoryPref.withUnsafeBufferPointer { categoryPref in
    index.categoryMandatory.withUnsafeBufferPointer { categoryMandatory in
    index.categoryDefault.withUnsafeBufferPointer { categoryDefault in
    index.categoryGatewayMandatory.withUnsafeBufferPointer { categoryGatewayMandatory in
    PoolView.lend(index.deviceJSON) { deviceJSON in
    PoolView.lend(index.userJSON) { userJSON in
    PoolView.lend(index.channels.pool) { channelNames in
      body(
        IndexColumns(
          channelMembers: channelMembers, memberUser: memberUser,
          memberSettings: memberSettings, memberSnooze: memberSnooze,
          snoozeGroups: snoozeGroups, snoozeBounds: snoozeBounds, userState: userState,
          dndWords: dndWords, userDevices: userDevices, deviceGateway: deviceGateway,
          deviceRestricted: deviceRestricted, userCategoryPrefs: userCategoryPrefs,
          categoryPrefCategory: categoryPrefCategory, categoryPrefGateway: categoryPrefGateway,
          categoryPref: categoryPref, categoryMandatory: categoryMandatory,
          categoryDefault: categoryDefault, categoryGatewayMandatory: categoryGatewayMandatory,
          deviceJSON: deviceJSON, userJSON: userJSON, channelNames: channelNames))
    }}}}}}}}}}}}}}}}}}}}}
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
