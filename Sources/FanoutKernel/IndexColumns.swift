import FanoutIndex
import FanoutModel

/// Raw views of the index columns the rule chain reads, so that the loop
/// pays no retain, bounds check or uniqueness check per pair.
///
/// Valid only inside `IndexColumns.Lender.lend`'s closure: each view is an
/// array's buffer lent for the closure's duration (as swift-collections'
/// types lend theirs), never kept past it. The evaluator borrows them per
/// chunk.
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

    @inline(__always)
    subscript(i: Int) -> UnsafeBufferPointer<UInt8> {
      UnsafeBufferPointer(rebasing: bytes[offsets[i]..<offsets[i &+ 1]])
    }
  }

  /// Views of nothing, held between lendings.
  static var unlent: IndexColumns { IndexColumns(noViews) }
  /// (`nonisolated(unsafe)`: never written; every view in it is empty.)
  private nonisolated(unsafe) static let noViews = Lender.Views()

  /// The views a lender has collected.
  init(_ views: Lender.Views) {
    channelMembers = views.channelMembers
    memberUser = views.memberUser
    memberSettings = views.memberSettings
    memberSnooze = views.memberSnooze
    snoozeGroups = views.snoozeGroups
    snoozeBounds = views.snoozeBounds
    userState = views.userState
    dndWords = views.dndWords
    userDevices = views.userDevices
    deviceGateway = views.deviceGateway
    deviceRestricted = views.deviceRestricted
    userCategoryPrefs = views.userCategoryPrefs
    categoryPrefCategory = views.categoryPrefCategory
    categoryPrefGateway = views.categoryPrefGateway
    categoryPref = views.categoryPref
    categoryMandatory = views.categoryMandatory
    categoryDefault = views.categoryDefault
    categoryGatewayMandatory = views.categoryGatewayMandatory
    muters = views.muters
    threadUsers = views.threadUsers
    threadLevels = views.threadLevels
    deviceJSON = PoolView(bytes: views.deviceJSONBytes, offsets: views.deviceJSONOffsets)
    userJSON = PoolView(bytes: views.userJSONBytes, offsets: views.userJSONOffsets)
    channelNames = PoolView(bytes: views.channelNameBytes, offsets: views.channelNameOffsets)
  }

  /// Lends an index's columns: `lend` runs a closure with views valid
  /// inside it. Each column's array lends its buffer in turn, the next
  /// inside the previous one's closure, the closure innermost. Built once
  /// per evaluator, so that lending costs no allocation per chunk.
  final class Lender {
    /// The views collected so far, innermost lending last.
    final class Views {
      var channelMembers = UnsafeBufferPointer<Int>(start: nil, count: 0)
      var memberUser = UnsafeBufferPointer<Int32>(start: nil, count: 0)
      var memberSettings = UnsafeBufferPointer<MemberSettings>(start: nil, count: 0)
      var memberSnooze = UnsafeBufferPointer<Int32>(start: nil, count: 0)
      var snoozeGroups = UnsafeBufferPointer<Int32>(start: nil, count: 0)
      var snoozeBounds = UnsafeBufferPointer<Int64>(start: nil, count: 0)
      var userState = UnsafeBufferPointer<UserState>(start: nil, count: 0)
      var dndWords = UnsafeBufferPointer<UInt64>(start: nil, count: 0)
      var userDevices = UnsafeBufferPointer<Int32>(start: nil, count: 0)
      var deviceGateway = UnsafeBufferPointer<UInt16>(start: nil, count: 0)
      var deviceRestricted = UnsafeBufferPointer<Bool>(start: nil, count: 0)
      var userCategoryPrefs = UnsafeBufferPointer<Int32>(start: nil, count: 0)
      var categoryPrefCategory = UnsafeBufferPointer<Int32>(start: nil, count: 0)
      var categoryPrefGateway = UnsafeBufferPointer<Int32>(start: nil, count: 0)
      var categoryPref = UnsafeBufferPointer<Preference>(start: nil, count: 0)
      var categoryMandatory = UnsafeBufferPointer<Bool>(start: nil, count: 0)
      var categoryDefault = UnsafeBufferPointer<Preference>(start: nil, count: 0)
      var categoryGatewayMandatory = UnsafeBufferPointer<Bool>(start: nil, count: 0)
      var muters = UnsafeBufferPointer<Int32>(start: nil, count: 0)
      var threadUsers = UnsafeBufferPointer<Int32>(start: nil, count: 0)
      var threadLevels = UnsafeBufferPointer<Level>(start: nil, count: 0)
      var deviceJSONBytes = UnsafeBufferPointer<UInt8>(start: nil, count: 0)
      var deviceJSONOffsets = UnsafeBufferPointer<Int>(start: nil, count: 0)
      var userJSONBytes = UnsafeBufferPointer<UInt8>(start: nil, count: 0)
      var userJSONOffsets = UnsafeBufferPointer<Int>(start: nil, count: 0)
      var channelNameBytes = UnsafeBufferPointer<UInt8>(start: nil, count: 0)
      var channelNameOffsets = UnsafeBufferPointer<Int>(start: nil, count: 0)
    }

    /// One column's lending. A class, so that the closure is stored at its
    /// own type: held as an array element (a generic slot), each call would
    /// reabstract the closure it is given, allocating per chunk and column.
    private final class Lending {
      let lend: (() -> Void) -> Void
      init(_ lend: @escaping (() -> Void) -> Void) { self.lend = lend }
    }
    private let views = Views()
    private var lendings: [Lending] = []

    init(_ index: Index) {
      let views = views
      func lending<T>(_ array: [T], _ keep: @escaping (UnsafeBufferPointer<T>) -> Void) -> Lending {
        Lending { next in
          array.withUnsafeBufferPointer {
            keep($0)
            next()
          }
        }
      }
      lendings = [
        lending(index.channelMembers) { views.channelMembers = $0 },
        lending(index.memberUser) { views.memberUser = $0 },
        lending(index.memberSettings) { views.memberSettings = $0 },
        lending(index.memberSnooze) { views.memberSnooze = $0 },
        lending(index.snoozeGroups) { views.snoozeGroups = $0 },
        lending(index.snoozeBounds) { views.snoozeBounds = $0 },
        lending(index.userState) { views.userState = $0 },
        lending(index.dndWords) { views.dndWords = $0 },
        lending(index.userDevices) { views.userDevices = $0 },
        lending(index.deviceGateway) { views.deviceGateway = $0 },
        lending(index.deviceRestricted) { views.deviceRestricted = $0 },
        lending(index.userCategoryPrefs) { views.userCategoryPrefs = $0 },
        lending(index.categoryPrefCategory) { views.categoryPrefCategory = $0 },
        lending(index.categoryPrefGateway) { views.categoryPrefGateway = $0 },
        lending(index.categoryPref) { views.categoryPref = $0 },
        lending(index.categoryMandatory) { views.categoryMandatory = $0 },
        lending(index.categoryDefault) { views.categoryDefault = $0 },
        lending(index.categoryGatewayMandatory) { views.categoryGatewayMandatory = $0 },
        lending(index.mutedBy.muters) { views.muters = $0 },
        lending(index.threadPrefs.users) { views.threadUsers = $0 },
        lending(index.threadPrefs.levels) { views.threadLevels = $0 },
        lending(index.deviceJSON.bytes) { views.deviceJSONBytes = $0 },
        lending(index.deviceJSON.offsets) { views.deviceJSONOffsets = $0 },
        lending(index.userJSON.bytes) { views.userJSONBytes = $0 },
        lending(index.userJSON.offsets) { views.userJSONOffsets = $0 },
        lending(index.channels.pool.bytes) { views.channelNameBytes = $0 },
        lending(index.channels.pool.offsets) { views.channelNameOffsets = $0 },
      ]
    }

    /// Runs `body` with the index's columns, valid inside it only. (No
    /// allocation: every closure here is non-escaping.)
    func lend(_ body: (IndexColumns) -> Void) { lend(from: 0, body) }

    private func lend(from i: Int, _ body: (IndexColumns) -> Void) {
      guard i < lendings.count else { return body(IndexColumns(views)) }
      lendings[i].lend { lend(from: i + 1, body) }
    }
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
