import FanoutIndex
import FanoutModel

/// Counting only: what the members of one large channel add up to, kept so
/// that a message there costs a few hundred additions and its patches
/// instead of a pass over the members.
///
/// Leaving aside the sender and the members a message singles out (named,
/// muting its sender, with a level for its thread: `SingledOut`), a
/// member's decision depends on a non-silent message only through its kind,
/// force, mention_all and category, and on the member only through
///
/// - the time state at the message: snoozed, in DND, or neither;
/// - the settings bits the rules read (`MemberSettings.ruleBits`: chat
///   level, calls, mention, pinned and @all notifications);
/// - what the gateway gate makes of the member's devices for the category.
///
/// So members are counted by *group* (time state × settings) and, per
/// category, their gate outcomes are summed per group; a message's counters
/// are then a sum over the groups. Members with neither snooze windows nor
/// DND are *timeless*: their groups are fixed for the channel. The others
/// are *timed* and grouped again for each UTC minute, except the *volatile*
/// ones, whose state may change within that minute (a snooze window starts
/// or ends inside it; their zone's offset changes inside it or is not a
/// whole number of minutes): those are evaluated per message.
final class ChannelShare {
  /// Time states (none, snoozed, in DND) × the values of the rule bits.
  static let groups = 3 * settingsValues
  private static let settingsValues = Int(MemberSettings.ruleBits) + 1

  /// The group of members in time state `time` with `settings`.
  @inline(__always)
  static func group(_ time: Evaluator.TimeState, _ settings: MemberSettings) -> Int {
    time.rawValue * settingsValues + Int(settings.raw & MemberSettings.ruleBits)
  }

  /// The time state and rule bits that `group` stands for.
  @inline(__always)
  static func members(of group: Int) -> (Evaluator.TimeState, MemberSettings) {
    (
      Evaluator.TimeState(rawValue: group / settingsValues)!,
      MemberSettings(raw: UInt8(group % settingsValues))
    )
  }

  let channel: Int32
  let timeless: GroupTally
  /// The timed members, by ascending slot: what regrouping them each minute
  /// reads, gathered so that it reads one flat array.
  let timedMembers: [TimedMember]
  /// The minute `timed` and `volatile` describe (Unix milliseconds / 60,000).
  var minute = Int64.min
  var timed: GroupTally
  /// Per entry of `timedMembers`, its group in `minute`, or -1 when volatile.
  var timedGroup: [Int]
  /// Per category + 1: each timed member's gate outcome (`GroupTally`
  /// layout, one group's width per member), once asked for.
  var timedGates: [[UInt32]?]
  /// Volatile members' slots in `minute`, ascending.
  var volatile: [Int] = []
  /// When the evaluator last used it, for eviction.
  var lastUse = 0

  init(channel: Int32, timeless: GroupTally, timedMembers: [TimedMember], gates: Int) {
    self.channel = channel
    self.timeless = timeless
    self.timedMembers = timedMembers
    timed = GroupTally(categories: timeless.gateSums.count - 1, gates: gates)
    timedGroup = [Int](repeating: -1, count: timedMembers.count)
    timedGates = [[UInt32]?](repeating: nil, count: timeless.gateSums.count)
  }

  func isVolatile(_ slot: Int) -> Bool {
    var lo = 0
    var hi = volatile.count
    while lo < hi {
      let mid = (lo + hi) / 2
      if volatile[mid] < slot { lo = mid + 1 } else { hi = mid }
    }
    return lo < volatile.count && volatile[lo] == slot
  }
}

/// A timed member of a shared channel.
struct TimedMember {
  let slot: Int
  let user: Int32
  /// The slot's snooze group, or -1.
  let snooze: Int32
  let settings: MemberSettings
  let state: UserState
}

/// Members counted by group and, per category (or none), the sums of their
/// gate outcomes by group, computed when a message first needs them.
final class GroupTally {
  var members = [Int](repeating: 0, count: ChannelShare.groups)
  /// Per category + 1 (index 0: no category): `groups × width` sums, laid
  /// out per group as deliveries per gateway, blocked per gateway, members
  /// with no device, members whose devices all fail the gate.
  var gateSums: [[Int]?]
  let width: Int

  init(categories: Int, gates gateways: Int) {
    gateSums = [[Int]?](repeating: nil, count: categories + 1)
    width = 2 * gateways + 2
  }

  func reset() {
    members.withUnsafeMutableBufferPointer { $0.update(repeating: 0) }
    for i in gateSums.indices { gateSums[i] = nil }
  }
}
