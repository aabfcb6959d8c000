import CPrefetch
import FanoutIndex
import FanoutModel
import FanoutTime
import FanoutTraffic

/// Evaluates messages against one index. Cheap to create; create one per
/// worker thread: it owns scratch space and caches (channel shares, zone
/// minutes) that carry from message to message, so it is a class, never
/// copied, used by one thread at a time.
public final class Evaluator {
  /// What an evaluation writes besides its counters.
  public enum Output: Sendable {
    /// Counters only: the decisions are made, no line is built.
    case counts
    /// Delivery lines per gateway.
    case deliveries
    /// Delivery lines and one decision line per pair.
    case deliveriesAndDecisions
    /// Counters and one `Outcome` record per pair, for comparing two snapshots.
    case outcomes
    /// Rule 8's candidates: per message, the member slots of its pairs
    /// delivered with trigger 'message' before any throttle (see
    /// `ThrottleJudge`).
    case throttleCandidates
    /// Contract v3's input: per message, its delivered pairs' users,
    /// triggers and delivery times (see `NotificationJudge`).
    case deliveredPairs
  }

  public let index: Index
  public let output: Output
  private let writeLines: Bool
  private let writeDecisions: Bool
  private let recordOutcomes: Bool
  private let recordCandidates: Bool
  private let recordDelivered: Bool
  /// The current batch's notification fields (contract v3), while lines
  /// are written; a cursor over the current message's.
  private var notes: NotificationFields? = nil
  private var noteCursor = 0..<0
  /// The current pair's notification fields, written on each of its
  /// recipient entries and on its decision line.
  private var pairFields: [UInt8] = []
  /// Views of `index`'s columns, valid while it is held.
  let columns: IndexColumns
  private let scratch: EvaluatorScratch
  private var openGateways: [Int] = []
  private var linePrefix: [UInt8] = []
  private var decisionPrefix: [UInt8] = []
  /// Whether each line starts with its traffic line number, `{"line":N,…`
  /// (`eval --mergeable`: `fanout merge` orders shards' lines by it, then
  /// removes it).
  public var writesLineNumbers = false
  private(set) var stamp = 0
  /// Counting only, messages in channels of at least this many members are
  /// counted through the channel's `ChannelShare`.
  private let sharingThreshold: Int
  private let presencePolicy: PresencePolicy
  /// Deferral instants of the current message per (DND pattern, zone),
  /// direct-mapped: `stamp` of the message, the key, the instant or `.min`.
  var deferralStamp = [Int](repeating: -1, count: 64)
  var deferralKey = [Int64](repeating: 0, count: 64)
  var deferralValue = [Int64](repeating: 0, count: 64)
  /// Counting only: shares of large channels, in a two-way set-associative
  /// table by channel, the least recently used way replaced.
  private var shares = [ChannelShare?](repeating: nil, count: shareSets * shareWays)
  private static let shareSets = 256
  private static let shareWays = 2
  private var shareClock = 0
  /// Counting only: large channels met lately, by channel modulo the table
  /// size. A share is built on a channel's second message: in chat traffic
  /// most groups get one message in a long while, and a share built for a
  /// single message costs more than evaluating it pair by pair.
  private var channelsMet = [Int32](repeating: -1, count: 4096)
  /// How many times timed members were regrouped (once per channel and
  /// minute, while a share is kept), for tests.
  public private(set) var minutesGrouped = 0

  /// From 64 members, building a channel's share costs about what one
  /// message evaluated pair by pair would, and it serves every later message.
  public static let defaultSharingThreshold = 64

  /// - Parameter shareChannelsFrom: with `.counts`, the channel size from
  ///   which messages are counted through a `ChannelShare`.
  public init(
    index: Index, output: Output, shareChannelsFrom: Int = Evaluator.defaultSharingThreshold
  ) {
    self.index = index
    self.output = output
    presencePolicy = PresencePolicy(index.settings)
    // A share's groups know nothing of deferral and presence: counted pair
    // by pair where they can change an outcome.
    let timeShifts = index.anyUserDefers || presencePolicy.action != .ignore
    sharingThreshold = output == .counts && !timeShifts ? max(1, shareChannelsFrom) : .max
    writeLines = output == .deliveries || output == .deliveriesAndDecisions
    writeDecisions = output == .deliveriesAndDecisions
    recordOutcomes = output == .outcomes
    recordCandidates = output == .throttleCandidates
    recordDelivered = output == .deliveredPairs
    columns = IndexColumns(index)
    scratch = EvaluatorScratch(zones: index.zones.count, gateways: index.gateways.count)
  }

  /// Evaluates `messages` of `batch` in order with the ledgers' `verdicts`
  /// for it, appending to `result`.
  public func evaluate(
    _ batch: MessageBatch, messages: Range<Int>, verdicts: LedgerVerdicts,
    into result: inout ChunkResult
  ) {
    evaluate(
      batch, messages: messages, throttled: verdicts.throttled,
      notifications: verdicts.notifications, into: &result)
  }

  /// Evaluates `messages` of `batch` in order, appending to `result`.
  ///
  /// - Parameters:
  ///   - throttled: the batch's members rule 8 throttles, when the index
  ///     sets a throttle (from `ThrottleJudge`, for this index).
  ///   - notifications: the batch's notification fields, when the index
  ///     turns notification groups on (from `NotificationJudge`).
  /// - Complexity: O(pairs + deliveries); allocates only to grow output
  ///   buffers. Counting only, a message in a large channel costs
  ///   O(groups + named users · log members), plus O(timed members) once
  ///   per channel and minute and O(members) once per channel and category.
  public func evaluate(
    _ batch: MessageBatch, messages: Range<Int>, throttled: ThrottledMembers? = nil,
    notifications: NotificationFields? = nil, into result: inout ChunkResult
  ) {
    let throttled = throttled ?? .none
    notes = writeLines ? notifications : nil
    defer { notes = nil }
    batch.mentions.withUnsafeBufferPointer { mentions in
      batch.channel.withUnsafeBufferPointer { channels in
        throttled.users.withUnsafeBufferPointer { throttledUsers in
          for m in messages {
            prefetch(channels, ahead: m, end: messages.upperBound)
            let cursor =
              throttled.starts.isEmpty
              ? SortedCursor.empty
              : SortedCursor(
                throttledUsers, Int(throttled.starts[m])..<Int(throttled.starts[m &+ 1]))
            evaluateMessage(batch, m, mentions, cursor, &result)
          }
        }
      }
    }
    for g in 0..<index.gateways.count {
      result.counters.deliveries[g] += scratch.deliveries[g]
      result.counters.blocked[g] += scratch.blocked[g]
      scratch.deliveries[g] = 0
      scratch.blocked[g] = 0
    }
    for r in 0..<Reason.allCases.count {
      result.counters.suppressed[r] += scratch.suppressed[r]
      scratch.suppressed[r] = 0
    }
  }

  /// Asks for the cache lines later messages start with, far enough ahead
  /// that each arrives in time: a message's member list bounds 8 messages
  /// ahead, its first slots 4 ahead, its first members' user records 2
  /// ahead; with lines on, where its channel's name lies 8 ahead and the
  /// name 4 ahead. (Within a message, `evaluateMessage` asks 8 members
  /// ahead.) Without this, each message waits on dependent cache misses.
  @inline(__always)
  private func prefetch(_ channels: UnsafeBufferPointer<Int32>, ahead m: Int, end: Int) {
    let c = columns
    if m &+ 8 < end {
      cprefetch_read(c.channelMembers.baseAddress! + Int(channels[m &+ 8]))
      if writeLines { cprefetch_read(c.channelNames.offsets.baseAddress! + Int(channels[m &+ 8])) }
    }
    if m &+ 4 < end {
      if writeLines {
        let name = c.channelNames.offsets[Int(channels[m &+ 4])]
        cprefetch_read(c.channelNames.bytes.baseAddress! + name)
      }
      let first = c.channelMembers[Int(channels[m &+ 4])]
      cprefetch_read(c.memberUser.baseAddress! + first)
      cprefetch_read(c.memberSettings.baseAddress! + first)
    }
    if m &+ 2 < end {
      let channel = Int(channels[m &+ 2])
      let first = c.channelMembers[channel]
      for slot in first..<min(c.channelMembers[channel &+ 1], first &+ Self.membersAhead) {
        cprefetch_read(c.userState.baseAddress! + Int(c.memberUser[slot]))
      }
    }
  }

  /// How many members ahead a user record is asked for.
  private static let membersAhead = 8

  /// Asks for the user record of the member in `slot`, if `slot < end`.
  @inline(__always)
  private func prefetchUser(_ slot: Int, before end: Int) {
    if slot < end { cprefetch_read(columns.userState.baseAddress! + Int(columns.memberUser[slot])) }
  }

  /// With lines on: asks for where the device fragments of the member in
  /// `slot` lie (its user record was asked for 3 members earlier).
  @inline(__always)
  private func prefetchDeviceOffsets(_ slot: Int, before end: Int) {
    guard slot < end else { return }
    let c = columns
    let first = Int(c.userState[Int(c.memberUser[slot])].firstDevice)
    cprefetch_read(c.deviceJSON.offsets.baseAddress! + first)
  }

  /// With lines on: asks for the device fragments of the member in `slot`
  /// (where they lie was asked for 3 members earlier), which a delivery copies.
  @inline(__always)
  private func prefetchDeviceLines(_ slot: Int, before end: Int) {
    guard slot < end else { return }
    let c = columns
    let u = Int(c.memberUser[slot])
    let state = c.userState[u]
    let first = Int(state.firstDevice)
    let devices = c.deviceCount(user: u, state)
    guard devices > 0 else { return }
    let bytes = c.deviceJSON.offsets[first]..<c.deviceJSON.offsets[first &+ devices]
    for line in stride(from: bytes.lowerBound, to: bytes.upperBound, by: 64) {
      cprefetch_read(c.deviceJSON.bytes.baseAddress! + line)
    }
  }

  private func evaluateMessage(
    _ batch: MessageBatch, _ m: Int, _ mentions: UnsafeBufferPointer<Int32>,
    _ throttled: SortedCursor, _ result: inout ChunkResult
  ) {
    // Silent messages and calls have no pair with trigger 'message'.
    if recordCandidates && (batch.silent[m] || batch.kind[m] == .call) {
      result.candidateEnds.append(Int32(result.candidateSlots.count))
      return
    }
    stamp += 1
    let c = columns
    let channel = Int(batch.channel[m])
    let members = c.channelMembers[channel]..<c.channelMembers[channel + 1]
    let terms = Terms(
      ts: batch.ts[m], kind: batch.kind[m], force: batch.force[m], silent: batch.silent[m],
      mentionAll: batch.mentionAll[m] && index.mentionAllApplies(in: channel),
      category: Int(batch.category[m]))
    let sender = batch.sender[m]
    var singledOut = singledOut(batch, m, channel, mentions, throttled)
    // A silent message decides every pair by rule 0: nothing to share.
    if members.count >= sharingThreshold && !terms.silent && metBefore(channel) {
      evaluateAlike(channel, members, terms, sender, singledOut, &result)
      return
    }

    if writeLines { buildLinePrefix(batch, m, channel) }
    if writeDecisions {
      decisionPrefix.removeAll(keepingCapacity: true)
      appendLineNumber(batch, m, to: &decisionPrefix)
      decisionPrefix += #""message":"#.utf8
      decisionPrefix += batch.idJSON[m]
      decisionPrefix += #","user":"#.utf8
    }
    var pairs = 0
    var delivered = 0
    if let notes { noteCursor = Int(notes.starts[m])..<Int(notes.starts[m &+ 1]) }

    for slot in members {
      prefetchUser(slot &+ Self.membersAhead, before: members.upperBound)
      if writeLines {
        prefetchDeviceOffsets(slot &+ 5, before: members.upperBound)
        prefetchDeviceLines(slot &+ 2, before: members.upperBound)
      }
      let u = c.memberUser[slot]
      if u == sender { continue }
      pairs &+= 1
      let pair = singledOut.terms(for: u)
      let verdict = evaluatePair(slot, u, terms, pair, sign: 1, &result)
      if verdict.reason == nil { delivered &+= 1 }
      if recordCandidates && verdict.reason == nil && verdict.trigger == .message {
        result.candidateSlots.append(Int32(slot))
      }
      if recordDelivered && verdict.reason == nil {
        result.deliveredUsers.append(u)
        result.deliveredTriggers.append(verdict.trigger)
        result.deliveredAt.append(verdict.deliverAt)
      }
      if writeDecisions { appendDecision(user: Int(u), verdict, ts: terms.ts, &result) }
      if recordOutcomes {
        result.pairUsers.append(u)
        result.pairOutcomes.append(
          verdict.reason.map(Outcome.suppressed) ?? .delivered(verdict.trigger))
        result.pairDeliveryHours.append(
          verdict.reason == nil && verdict.deliverAt > terms.ts
            ? UInt8(LocalTime.utcHour(millis: verdict.deliverAt))
            : UInt8(LocalTime.utcHour(millis: terms.ts)))
      }
    }
    if recordOutcomes { result.messagePairEnds.append(Int32(result.pairUsers.count)) }
    if recordCandidates { result.candidateEnds.append(Int32(result.candidateSlots.count)) }
    if recordDelivered { result.deliveredEnds.append(Int32(result.deliveredUsers.count)) }
    result.counters.messages += 1
    result.counters.pairs += pairs
    result.counters.delivered += delivered

    if writeLines {
      for g in openGateways { result.gatewayLines[g] += "]}\n".utf8 }
      openGateways.removeAll(keepingCapacity: true)
    }
  }

  /// The members message `m` singles out: its mentions and reply_to, the
  /// users who muted its sender, those with a level for its thread here,
  /// those rule 8 throttles.
  @inline(__always)
  private func singledOut(
    _ batch: MessageBatch, _ m: Int, _ channel: Int, _ mentions: UnsafeBufferPointer<Int32>,
    _ throttled: SortedCursor
  ) -> SingledOut {
    let c = columns
    let named = Int(batch.mentionOffsets[m])..<Int(batch.mentionOffsets[m &+ 1])
    var threadRows = 0..<0
    if batch.hasThread[m] {
      let thread = batch.thread.withBytes(m) { index.threadPrefs.thread(named: $0) }
      threadRows = index.threadPrefs.range(channel: channel, thread: thread)
    }
    return SingledOut(
      mentions: SortedCursor(mentions, named), replyTo: batch.replyTo[m],
      muters: SortedCursor(c.muters, index.mutedBy.range(of: batch.sender[m])),
      threadUsers: SortedCursor(c.threadUsers, threadRows), threadLevels: c.threadLevels,
      throttled: throttled)
  }

  /// The rule chain for one pair, tallied into the counters `sign` times
  /// (−1 takes a pair back out of a channel share's counts). With lines on, appends
  /// the pair's deliveries.
  @inline(__always)
  private func evaluatePair(
    _ slot: Int, _ u: Int32, _ terms: Terms, _ pair: PairTerms, sign: Int,
    _ result: inout ChunkResult
  ) -> Verdict {
    let c = columns
    let settings = c.memberSettings[slot]
    let state = c.userState[Int(u)]
    // The time tests only where they can decide.
    let snooze = settings.hasSnooze ? c.memberSnooze[slot] : -1
    let time: TimeState =
      !terms.timeMatters || pair.mutedSender
      ? .free
      : isSnoozed(group: snooze, terms.ts)
        ? .snoozed : isInDND(state, terms.ts) ? .dnd : .free
    var verdict = Self.decide(
      time, terms, pair, settings, presence: presencePolicy,
      deferredUntil: { state.defers ? self.deferral(terms.ts, snooze: snooze, state) : nil },
      isActive: { state.hasPresence && self.index.presence.contains(user: Int(u), terms.ts) })
    let trigger = verdict.trigger
    let deferredTo: Int64? = verdict.deliverAt > terms.ts ? verdict.deliverAt : nil

    if verdict.reason == nil {
      let throttled = Self.isThrottled(pair, trigger)
      if notes != nil { takePairFields(u) }
      let devices = c.deviceCount(user: Int(u), state)
      var passed = 0
      for k in 0..<devices {
        let (g, restricted) = c.deviceGate(k, state)
        if passesGate(
          gateway: g, restricted: restricted, user: Int(u), state, category: terms.category)
        {
          if !throttled {
            appendDelivery(
              device: Int(state.firstDevice) &+ k, gateway: g, trigger: trigger,
              preview: settings.showPreview, deferredTo: deferredTo, sign: sign, &result)
          }
          passed &+= 1
        } else {
          scratch.blocked[g] &+= sign
        }
      }
      verdict.reason =
        Self.gateRule(devices: devices, passed: passed) ?? (throttled ? .throttled : nil)
    }
    if let reason = verdict.reason {
      scratch.suppressed[Int(reason.rawValue)] &+= sign
    } else if deferredTo != nil {
      result.counters.deferred &+= sign
    }
    return verdict
  }

  /// Counts a message in a large channel from its `ChannelShare`, then
  /// patches the pairs that differ: the sender forms none, each member the
  /// message singles out is evaluated again with its own terms, and the
  /// volatile members one by one.
  private func evaluateAlike(
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
  private func metBefore(_ channel: Int) -> Bool {
    let entry = channel & (channelsMet.count &- 1)
    if channelsMet[entry] == Int32(channel) { return true }
    channelsMet[entry] = Int32(channel)
    return false
  }

  /// The channel's share, from the cache or built: its timeless members
  /// counted by settings, its timed members listed.
  private func channelShare(_ channel: Int, _ members: Range<Int>) -> ChannelShare {
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
  private func regroupTimed(_ share: ChannelShare, _ minute: Int64, _ ts: Int64) {
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
  private func forEachGateOutcome(
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
  private func sumTimelessGates(_ share: ChannelShare, _ members: Range<Int>, _ category: Int) {
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
  private func sumTimedGates(_ share: ChannelShare, _ category: Int) {
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
  private func addGroups(_ tally: GroupTally, _ terms: Terms) -> (pairs: Int, delivered: Int) {
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
  private func isVolatile(_ member: TimedMember, _ minuteStart: Int64) -> Bool {
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
  private func isZoneSteady(_ zone: Int, _ minuteStart: Int64) -> Bool {
    if scratch.zoneSteadyMinute[zone] != minuteStart {
      let span = index.zones[zone].offsetSpan(atMillis: minuteStart)
      scratch.zoneSteadyMinute[zone] = minuteStart
      scratch.zoneSteady[zone] =
        span.from <= minuteStart && span.until >= minuteStart + 60_000 && span.offset % 60 == 0
    }
    return scratch.zoneSteady[zone]
  }

  /// The membership slot of user row `u` in `members` (ordered by user row), if any.
  private func slot(of u: Int32, in members: Range<Int>) -> Int? {
    guard u >= 0 else { return nil }
    var lo = members.lowerBound
    var hi = members.upperBound
    while lo < hi {
      let mid = (lo &+ hi) &>> 1
      if columns.memberUser[mid] < u { lo = mid &+ 1 } else { hi = mid }
    }
    return lo < members.upperBound && columns.memberUser[lo] == u ? lo : nil
  }

  /// `{"message":…,"channel":…,"ts":…,"kind":…,"recipients":[` for message m.
  private func buildLinePrefix(_ batch: MessageBatch, _ m: Int, _ channel: Int) {
    linePrefix.removeAll(keepingCapacity: true)
    appendLineNumber(batch, m, to: &linePrefix)
    linePrefix += #""message":"#.utf8
    linePrefix += batch.idJSON[m]
    linePrefix += #","channel":"#.utf8
    JSONText.appendQuoted(UnsafeRawBufferPointer(columns.channelNames[channel]), to: &linePrefix)
    linePrefix += #","ts":"#.utf8
    JSONText.appendDecimal(batch.ts[m], to: &linePrefix)
    linePrefix += Self.kindAndRecipients[Int(batch.kind[m].rawValue)]
  }

  /// `{`, or `{"line":N,` with `writesLineNumbers`.
  private func appendLineNumber(_ batch: MessageBatch, _ m: Int, to bytes: inout [UInt8]) {
    bytes.append(UInt8(ascii: "{"))
    guard writesLineNumbers else { return }
    bytes += #""line":"#.utf8
    JSONText.appendDecimal(Int64(batch.lines[m]), to: &bytes)
    bytes.append(UInt8(ascii: ","))
  }

  /// `,"kind":"…","recipients":[` per `MessageKind`.
  private static let kindAndRecipients = FixedStrings(
    MessageKind.allCases.map { #","kind":"\#($0.name)","recipients":["# })

  /// Rule 1: ts lies in a window of the snooze group (a slot's windows at
  /// the user, scope and channel level), if any.
  @inline(__always)
  private func isSnoozed(group: Int32, _ ts: Int64) -> Bool {
    let group = Int(group)
    if group < 0 { return false }
    for w in Int(columns.snoozeGroups[group])..<Int(columns.snoozeGroups[group + 1])
    where columns.snoozeBounds[2 * w] <= ts && ts < columns.snoozeBounds[2 * w + 1] {
      return true
    }
    return false
  }

  /// Rule 2: the local minute of the week lies in the user's DND pattern.
  @inline(__always)
  private func isInDND(_ state: UserState, _ ts: Int64) -> Bool {
    let pattern = Int(state.dnd)
    if pattern < 0 { return false }
    let zone = Int(state.zone)
    if scratch.zoneStamp[zone] != stamp { cacheLocalMinute(zone: zone, ts: ts) }
    let minute = scratch.zoneMinute[zone]
    return columns.dndWords[pattern &* DNDPattern.wordCount &+ minute &>> 6]
      & (1 &<< UInt64(minute & 63)) != 0
  }

  @inline(never)
  private func cacheLocalMinute(zone: Int, ts: Int64) {
    scratch.zoneStamp[zone] = stamp
    scratch.zoneMinute[zone] = LocalTime.minuteOfWeek(
      utcMillis: ts, offsetSeconds: index.zones[zone].offsetSeconds(atMillis: ts))
  }

  /// The gateway gate for one device (on gateway row `g`) of user `u`,
  /// whose record is `state`.
  @inline(__always)
  private func passesGate(
    gateway g: Int, restricted: Bool, user u: Int, _ state: UserState, category cat: Int
  ) -> Bool {
    let c = columns
    let gateways = index.gateways.count
    if cat >= 0 && c.categoryGatewayMandatory[cat &* gateways &+ g] { return true }
    if restricted { return false }
    if cat < 0 { return true }
    var whole: Preference? = nil
    var onGateway: Preference? = nil
    let prefs =
      state.hasCategoryPrefs ? Int(c.userCategoryPrefs[u])..<Int(c.userCategoryPrefs[u + 1]) : 0..<0
    for r in prefs where c.categoryPrefCategory[r] == cat {
      let prefGateway = Int(c.categoryPrefGateway[r])
      if prefGateway < 0 {
        whole = c.categoryPref[r]
      } else if prefGateway == g {
        onGateway = c.categoryPref[r]
      }
    }
    let categoryPreference = c.categoryMandatory[cat] ? .optIn : (whole ?? c.categoryDefault[cat])
    return categoryPreference == .optIn && onGateway != .optOut
  }

  /// `,"trigger":"…","preview":…` per trigger and preview, then `}`
  /// (delivered at ts), `,"deliver_at":` (deferred) or nothing (notification
  /// fields follow).
  private static let recipientSuffixes = FixedStrings(
    Trigger.allCases.flatMap { trigger in
      [false, true].flatMap { preview in
        ["}", #","deliver_at":"#, ""].map { end in
          #","trigger":"\#(trigger.name)","preview":\#(preview)\#(end)"#
        }
      }
    })

  @inline(__always)
  private func appendDelivery(
    device d: Int, gateway g: Int, trigger: Trigger, preview: Bool, deferredTo: Int64?,
    sign: Int, _ result: inout ChunkResult
  ) {
    scratch.deliveries[g] &+= sign
    guard writeLines else { return }
    if scratch.gatewayStamp[g] != stamp {
      scratch.gatewayStamp[g] = stamp
      openGateways.append(g)
      result.gatewayLines[g] += linePrefix
    } else {
      result.gatewayLines[g].append(UInt8(ascii: ","))
    }
    result.gatewayLines[g].append(contentsOf: columns.deviceJSON[d])
    let suffix = (Int(trigger.rawValue) &* 2 &+ (preview ? 1 : 0)) &* 3
    if let deferredTo {
      result.gatewayLines[g].append(contentsOf: Self.recipientSuffixes[suffix &+ 1])
      JSONText.appendDecimal(deferredTo, to: &result.gatewayLines[g])
    } else {
      result.gatewayLines[g].append(
        contentsOf: Self.recipientSuffixes[notes == nil ? suffix : suffix &+ 2])
      if notes == nil { return }
    }
    if notes != nil { result.gatewayLines[g] += pairFields }
    result.gatewayLines[g].append(UInt8(ascii: "}"))
  }

  /// Contract v3: the notification fields of the delivered pair of user
  /// `u` (the next of the message's that is `u`'s), into `pairFields`;
  /// empty when it has none (a pair that will not be delivered).
  @inline(never)
  private func takePairFields(_ u: Int32) {
    pairFields.removeAll(keepingCapacity: true)
    guard let notes else { return }
    while !noteCursor.isEmpty && notes.users[noteCursor.lowerBound] < u {
      noteCursor = (noteCursor.lowerBound &+ 1)..<noteCursor.upperBound
    }
    guard !noteCursor.isEmpty, notes.users[noteCursor.lowerBound] == u else { return }
    notes.appendFields(noteCursor.lowerBound, to: &pairFields)
  }

  private static let decisionSuffix = (
    delivered: FixedStrings(Trigger.allCases.map { #","deliver":true,"trigger":"\#($0.name)""# }),
    suppressed: FixedStrings(
      Reason.allCases.map { #","deliver":false,"reason":"\#($0.name)"}\#n"# })
  )

  /// The pair's decision line; a deferred pair's carries `deliver_at`.
  @inline(__always)
  private func appendDecision(
    user u: Int, _ verdict: Verdict, ts: Int64, _ result: inout ChunkResult
  ) {
    result.decisionLines += decisionPrefix
    result.decisionLines.append(contentsOf: columns.userJSON[u])
    if let reason = verdict.reason {
      result.decisionLines += Self.decisionSuffix.suppressed[Int(reason.rawValue)]
      return
    }
    result.decisionLines += Self.decisionSuffix.delivered[Int(verdict.trigger.rawValue)]
    if verdict.deliverAt > ts {
      result.decisionLines += #","deliver_at":"#.utf8
      JSONText.appendDecimal(verdict.deliverAt, to: &result.decisionLines)
    }
    if notes != nil { result.decisionLines += pairFields }
    result.decisionLines += "}\n".utf8
  }
}
