import FanoutIndex
import FanoutModel
import FanoutTime

/// Counting a large channel's message from its `ChannelShare` (counting
/// only): members grouped by what decides their pairs, patched where a
/// message singles members out.
extension Evaluator {
  /// Counts a message in a large channel from its `ChannelShare`, then
  /// patches the pairs that differ: the sender forms none, each member the
  /// message singles out is evaluated again with its own terms, and the
  /// volatile members one by one.
  func evaluateAlike(
    _ channel: Int, _ members: Range<Int>, _ terms: Terms, _ sender: Int32,
    _ singledOut: SingledOut, _ result: inout ChunkResult
  ) {
    let share = channelShare(channel, members)
    let minute = LocalTime.floorDiv(terms.ts, 60_000)
    if share.minute != minute { regroupTimed(share, minute, terms.ts) }
    let category = terms.category
    if share.timeless.gateSums[category + 1] == nil { sumTimelessGates(share, members, category) }
    if share.timed.gateSums[category + 1] == nil { sumTimedGates(share, category) }
    var (pairs, delivered) = addGroups(share.timeless, terms)
    let (timedPairs, timedDelivered) = addGroups(share.timed, terms)
    pairs += timedPairs
    delivered += timedDelivered

    if let slot = slot(of: sender, in: members), !share.isVolatile(slot) {
      let verdict = evaluatePair(slot, sender, terms, .plain, sign: -1, &result)
      pairs -= 1
      if verdict.reason == nil { delivered -= 1 }
    }
    // Each singled-out member once: out as counted, back in with its terms.
    var walk = singledOut
    var lookup = singledOut
    walk.forEachUser { u in
      let pair = lookup.terms(for: u)
      guard u != sender, let slot = slot(of: u, in: members), !share.isVolatile(slot) else {
        return
      }
      let before = evaluatePair(slot, u, terms, .plain, sign: -1, &result)
      let after = evaluatePair(slot, u, terms, pair, sign: 1, &result)
      delivered += (after.reason == nil ? 1 : 0) - (before.reason == nil ? 1 : 0)
    }
    var volatileLookup = singledOut
    for slot in share.volatile {
      let u = columns.memberUser[slot]
      let pair = volatileLookup.terms(for: u)
      if u == sender { continue }
      pairs += 1
      if evaluatePair(slot, u, terms, pair, sign: 1, &result).reason == nil { delivered += 1 }
    }
    result.counters.messages += 1
    result.counters.pairs += pairs
    result.counters.delivered += delivered
  }

  /// Whether `channel` was met since its entry in `channelsMet` was last
  /// taken by another channel; marks it met.
  @inline(__always)
  func metBefore(_ channel: Int) -> Bool {
    let entry = channel & (channelsMet.count &- 1)
    if channelsMet[entry] == Int32(channel) { return true }
    channelsMet[entry] = Int32(channel)
    return false
  }

  /// The channel's share, from the cache or built: its timeless members
  /// counted by settings, its timed members listed.
  func channelShare(_ channel: Int, _ members: Range<Int>) -> ChannelShare {
    shareClock += 1
    let first = (channel % Self.shareSets) * Self.shareWays
    let ways = first..<(first + Self.shareWays)
    if let i = ways.first(where: { shares[$0]?.channel == Int32(channel) }) {
      shares[i]!.lastUse = shareClock
      return shares[i]!
    }
    let timeless = GroupTally(categories: index.categories.count, gates: index.gateways.count)
    var timedMembers: [TimedMember] = []
    let c = columns
    for slot in members {
      prefetchUser(slot &+ Self.membersAhead, before: members.upperBound)
      let u = c.memberUser[slot]
      let state = c.userState[Int(u)]
      let settings = c.memberSettings[slot]
      if settings.hasSnooze || state.dnd >= 0 {
        timedMembers.append(
          TimedMember(
            slot: slot, user: u, snooze: c.memberSnooze[slot], settings: settings, state: state))
      } else {
        timeless.members[Int(settings.raw & MemberSettings.ruleBits)] += 1
      }
    }
    let share = ChannelShare(
      channel: Int32(channel), timeless: timeless, timedMembers: timedMembers,
      gates: index.gateways.count)
    share.lastUse = shareClock
    let free =
      ways.first { shares[$0] == nil } ?? ways.min { shares[$0]!.lastUse < shares[$1]!.lastUse }!
    shares[free] = share
    return share
  }

  /// Groups the timed members for `minute` (at `ts`, one instant of it),
  /// setting the volatile ones aside.
  func regroupTimed(_ share: ChannelShare, _ minute: Int64, _ ts: Int64) {
    minutesGrouped += 1
    share.minute = minute
    share.timed.reset()
    share.volatile.removeAll(keepingCapacity: true)
    let minuteStart = minute * 60_000
    for (i, member) in share.timedMembers.enumerated() {
      if isVolatile(member, minuteStart) {
        share.timedGroup[i] = -1
        share.volatile.append(member.slot)
        continue
      }
      let time: TimeState =
        isSnoozed(group: member.snooze, ts) ? .snoozed : isInDND(member.state, ts) ? .dnd : .free
      let group = ChannelShare.group(time, member.settings)
      share.timedGroup[i] = group
      share.timed.members[group] += 1
    }
  }

  /// The gate outcome of user `u`'s devices for `category`, as the offsets
  /// within a `GroupTally` group to count once each: per device, delivery
  /// (gateway) or blocked (gateways + gateway); then no device (2 ×
  /// gateways) or all devices gated (2 × gateways + 1) where that is so.
  @inline(__always)
  func forEachGateOutcome(
    user u: Int, _ state: UserState, category: Int, _ count: (Int) -> Void
  ) {
    let c = columns
    let gateways = index.gateways.count
    let devices = c.deviceCount(user: u, state)
    if devices == 0 {
      count(2 * gateways)
      return
    }
    var passed = false
    for k in 0..<devices {
      let (g, restricted) = c.deviceGate(k, state)
      if passesGate(gateway: g, restricted: restricted, user: u, state, category: category) {
        count(g)
        passed = true
      } else {
        count(gateways + g)
      }
    }
    if !passed { count(2 * gateways + 1) }
  }

  /// The timeless members' gate outcomes for `category`, summed per group.
  func sumTimelessGates(_ share: ChannelShare, _ members: Range<Int>, _ category: Int) {
    let width = share.timeless.width
    var sums = [Int](repeating: 0, count: ChannelShare.groups * width)
    var timed = share.timedMembers.lazy.map(\.slot).makeIterator()
    var nextTimed = timed.next()
    for slot in members {
      prefetchUser(slot &+ Self.membersAhead, before: members.upperBound)
      if slot == nextTimed {
        nextTimed = timed.next()
        continue
      }
      let base = Int(columns.memberSettings[slot].raw & MemberSettings.ruleBits) * width
      let u = Int(columns.memberUser[slot])
      forEachGateOutcome(user: u, columns.userState[u], category: category) {
        sums[base + $0] += 1
      }
    }
    share.timeless.gateSums[category + 1] = sums
  }

  /// The steady timed members' gate outcomes for `category`, summed per
  /// group of the current minute. Each member's outcome is worked out once
  /// per channel and kept, as it does not depend on the time.
  func sumTimedGates(_ share: ChannelShare, _ category: Int) {
    let width = share.timed.width
    if share.timedGates[category + 1] == nil {
      var outcomes = [UInt32](repeating: 0, count: share.timedMembers.count * width)
      for (i, member) in share.timedMembers.enumerated() {
        forEachGateOutcome(user: Int(member.user), member.state, category: category) {
          outcomes[i * width + $0] += 1
        }
      }
      share.timedGates[category + 1] = outcomes
    }
    let outcomes = share.timedGates[category + 1]!
    var sums = [Int](repeating: 0, count: ChannelShare.groups * width)
    for (i, group) in share.timedGroup.enumerated() where group >= 0 {
      for k in 0..<width { sums[group * width + k] += Int(outcomes[i * width + k]) }
    }
    share.timed.gateSums[category + 1] = sums
  }

  /// Adds the counters of every member in `tally` as a recipient of a
  /// message with `terms` (nobody named) to the scratch counters; returns
  /// the pairs and the delivered pairs.
  func addGroups(_ tally: GroupTally, _ terms: Terms) -> (pairs: Int, delivered: Int) {
    let gateways = index.gateways.count
    let sums = tally.gateSums[terms.category + 1]!
    var pairs = 0
    var delivered = 0
    for group in 0..<ChannelShare.groups where tally.members[group] > 0 {
      let n = tally.members[group]
      pairs += n
      let (time, settings) = ChannelShare.members(of: group)
      // Nobody in a group is singled out (those are patched afterwards).
      // Shares serve indexes without deferral or presence (`sharingThreshold`).
      if let reason = Self.decide(time, terms, .plain, settings).reason {
        scratch.suppressed[Int(reason.rawValue)] &+= n
        continue
      }
      let base = group * tally.width
      for g in 0..<gateways {
        scratch.deliveries[g] &+= sums[base + g]
        scratch.blocked[g] &+= sums[base + gateways + g]
      }
      let noDevice = sums[base + 2 * gateways]
      let optedOut = sums[base + 2 * gateways + 1]
      scratch.suppressed[Int(Reason.noDevice.rawValue)] &+= noDevice
      scratch.suppressed[Int(Reason.optedOut.rawValue)] &+= optedOut
      delivered += n - noDevice - optedOut
    }
    return (pairs, delivered)
  }

  /// Whether the timed member's snooze or DND status may change within the
  /// UTC minute from `minuteStart`.
  @inline(__always)
  func isVolatile(_ member: TimedMember, _ minuteStart: Int64) -> Bool {
    let c = columns
    let group = Int(member.snooze)
    if group >= 0 {
      for bound in (2 * Int(c.snoozeGroups[group]))..<(2 * Int(c.snoozeGroups[group + 1])) {
        let b = c.snoozeBounds[bound]
        if b > minuteStart && b < minuteStart + 60_000 { return true }
      }
    }
    return member.state.dnd >= 0 && !isZoneSteady(Int(member.state.zone), minuteStart)
  }

  /// Whether the zone's local minute is the same all through the UTC minute
  /// from `minuteStart`: one offset throughout, a whole number of minutes.
  @inline(__always)
  func isZoneSteady(_ zone: Int, _ minuteStart: Int64) -> Bool {
    if scratch.zoneSteadyMinute[zone] != minuteStart {
      let span = index.zones[zone].offsetSpan(atMillis: minuteStart)
      scratch.zoneSteadyMinute[zone] = minuteStart
      scratch.zoneSteady[zone] =
        span.from <= minuteStart && span.until >= minuteStart + 60_000 && span.offset % 60 == 0
    }
    return scratch.zoneSteady[zone]
  }
}
