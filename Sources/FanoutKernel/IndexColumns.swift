import FanoutIndex
import FanoutModel

/// Raw views of the index columns the rule chain reads, taken once per
/// evaluator so that the loop pays no retain, bounds check or uniqueness
/// check per pair.
///
/// Safe because `Index` is immutable (`let` arrays, never mutated, in a
/// final class) and the evaluator holding the views holds its index: the
/// buffers neither move nor go away while the views exist. (Lending them
/// per call instead would nest twenty-one `withUnsafeBufferPointer`
/// closures; the clean fix is columns the index owns as raw allocations,
/// behind accessors, which is left for later.)
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
  let muters: UnsafeBufferPointer<Int32>
  let threadUsers: UnsafeBufferPointer<Int32>
  let threadLevels: UnsafeBufferPointer<Level>
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

    init(_ pool: BytePool) {
      bytes = pool.bytes.withUnsafeBufferPointer { $0 }
      offsets = pool.offsets.withUnsafeBufferPointer { $0 }
    }

    init(bytes: UnsafeBufferPointer<UInt8>, offsets: UnsafeBufferPointer<Int>) {
      self.bytes = bytes
      self.offsets = offsets
    }

    @inline(__always)
    subscript(i: Int) -> UnsafeBufferPointer<UInt8> {
      UnsafeBufferPointer(rebasing: bytes[offsets[i]..<offsets[i &+ 1]])
    }
  }

  init(_ index: Index) {
    func view<T>(_ array: [T]) -> UnsafeBufferPointer<T> { array.withUnsafeBufferPointer { $0 } }
    channelMembers = view(index.channelMembers)
    memberUser = view(index.memberUser)
    memberSettings = view(index.memberSettings)
    memberSnooze = view(index.memberSnooze)
    snoozeGroups = view(index.snoozeGroups)
    snoozeBounds = view(index.snoozeBounds)
    userState = view(index.userState)
    dndWords = view(index.dndWords)
    userDevices = view(index.userDevices)
    deviceGateway = view(index.deviceGateway)
    deviceRestricted = view(index.deviceRestricted)
    userCategoryPrefs = view(index.userCategoryPrefs)
    categoryPrefCategory = view(index.categoryPrefCategory)
    categoryPrefGateway = view(index.categoryPrefGateway)
    categoryPref = view(index.categoryPref)
    categoryMandatory = view(index.categoryMandatory)
    categoryDefault = view(index.categoryDefault)
    categoryGatewayMandatory = view(index.categoryGatewayMandatory)
    muters = view(index.mutedBy.muters)
    threadUsers = view(index.threadPrefs.users)
    threadLevels = view(index.threadPrefs.levels)
    deviceJSON = PoolView(index.deviceJSON)
    userJSON = PoolView(index.userJSON)
    channelNames = PoolView(index.channels.pool)
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
