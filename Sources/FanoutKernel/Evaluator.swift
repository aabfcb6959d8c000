import FanoutIndex
import FanoutModel
import FanoutTime

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
    /// Rule 8's input: per message, its pairs delivered with trigger
    /// 'message' before any throttle (`ChunkResult.delivered`, see `Ledgers`).
    case throttleCandidates
    /// Contract v3's input, and rule 8's: per message, all its pairs
    /// delivered before any throttle (`ChunkResult.delivered`).
    case deliveredPairs
    /// `.outcomes`, and per pair its delivery time and the devices it is
    /// delivered to (`fanout audit` compares them with what was sent).
    case audit
    /// `.audit` and `.deliveredPairs`, evaluated without rule 8: the pass
    /// before the ledgers of `fanout audit` (`LedgerPass.audit`), whose
    /// outcomes rule 8's verdicts then complete (`applyThrottle`).
    case auditAndDeliveredPairs
    /// `.outcomes` and `.deliveredPairs`, evaluated without rule 8: the
    /// pass before the ledgers (`LedgerPass.outcomes`) of a comparison,
    /// whose outcomes rule 8's verdicts then complete (`applyThrottle`),
    /// or of decision lines (`writeDelivered`), instead of a second
    /// evaluation.
    case outcomesAndDeliveredPairs
  }

  public let index: Index
  public let output: Output
  let writeLines: Bool
  let writeDecisions: Bool
  let recordOutcomes: Bool
  let recordCandidates: Bool
  let recordDelivered: Bool
  let recordDevices: Bool
  /// The current batch's notification fields (contract v3), while lines
  /// are written; a cursor over the current message's.
  var notes = NotificationFields.View.empty
  /// Whether lines carry notification fields (`notes` views the batch's).
  var writesNotes = false
  var noteCursor = 0..<0
  /// The current pair's notification in `notes` (−1: none), whose fields
  /// are written on each of its recipient entries and on its decision line.
  var pairNote = -1
  /// What follows each device's JSON in the current pair's recipient
  /// entries (`makeRecipientTail`): one of `recipientSuffixes`, or (−1)
  /// the bytes of `recipientTail`.
  var fixedRecipientTail = -1
  var recipientTail = ByteScratch()
  /// Views of `index`'s columns, valid while it is held.
  let columns: IndexColumns
  let scratch: EvaluatorScratch
  var openGateways: [Int] = []
  var linePrefix: [UInt8] = []
  var decisionPrefix: [UInt8] = []
  /// Whether each line starts with its traffic line number, `{"line":N,…`
  /// (`eval --mergeable`: `fanout merge` orders shards' lines by it, then
  /// removes it).
  public var writesLineNumbers = false
  /// With `.outcomes`: whether each pair's local hour is recorded
  /// (`ChunkResult.pairLocalHours`).
  public var recordsLocalHours = false
  var stamp = 0
  /// Counting only, messages in channels of at least this many members are
  /// counted through the channel's `ChannelShare`.
  let sharingThreshold: Int
  let presencePolicy: PresencePolicy
  /// Deferral instants of the current message per (DND pattern, zone),
  /// direct-mapped: `stamp` of the message, the key, the instant or `.min`.
  var deferralStamp = [Int](repeating: -1, count: 64)
  var deferralKey = [Int64](repeating: 0, count: 64)
  var deferralValue = [Int64](repeating: 0, count: 64)
  /// Counting only: shares of large channels, in a two-way set-associative
  /// table by channel, the least recently used way replaced.
  var shares = [ChannelShare?](repeating: nil, count: shareSets * shareWays)
  static let shareSets = 256
  static let shareWays = 2
  var shareClock = 0
  /// Counting only: large channels met lately, by channel modulo the table
  /// size. A share is built on a channel's second message: in chat traffic
  /// most groups get one message in a long while, and a share built for a
  /// single message costs more than evaluating it pair by pair.
  var channelsMet = [Int32](repeating: -1, count: 4096)
  /// How many times timed members were regrouped (once per channel and
  /// minute, while a share is kept), for tests.
  public internal(set) var minutesGrouped = 0

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
    let audit = output == .audit || output == .auditAndDeliveredPairs
    recordOutcomes = output == .outcomes || audit || output == .outcomesAndDeliveredPairs
    recordDevices = audit
    recordCandidates = output == .throttleCandidates
    recordDelivered =
      output == .deliveredPairs || output == .outcomesAndDeliveredPairs
      || output == .auditAndDeliveredPairs
    columns = IndexColumns(index)
    scratch = EvaluatorScratch(zones: index.zones.count, gateways: index.gateways.count)
  }

  deinit { recipientTail.deallocate() }

  /// Evaluates `messages` of `batch` in order with the ledgers' `verdicts`
  /// for it, appending to `result`.
  public func evaluate(
    _ batch: MessageBatch, messages: Range<Int>, verdicts: LedgerVerdicts,
    into result: inout ChunkResult
  ) {
    evaluate(
      batch, messages: messages, throttled: verdicts.throttled,
      notifications: verdicts.notifications, passed: verdicts.evaluated[messages.lowerBound],
      into: &result)
  }

  /// Evaluates `messages` of `batch` in order, appending to `result`.
  ///
  /// - Parameters:
  ///   - throttled: the batch's members rule 8 throttles, when the index
  ///     sets a throttle (from `ThrottleJudge`, for this index).
  ///   - notifications: the batch's notification fields, when the index
  ///     turns notification groups on (from `NotificationJudge`).
  ///   - passed: the same messages as the pass before the ledgers
  ///     evaluated them (`LedgerPass.deliveries`, or `.outcomes` with
  ///     decision lines): lines and counts are then made from what it
  ///     found (`writeDelivered`), no pair decided again.
  /// - Complexity: O(pairs + deliveries), O(deliveries) from `passed`;
  ///   allocates only to grow output buffers. Counting only, a message in
  ///   a large channel costs O(groups + named users · log members), plus
  ///   O(timed members) once per channel and minute and O(members) once
  ///   per channel and category.
  public func evaluate(
    _ batch: MessageBatch, messages: Range<Int>, throttled: ThrottledMembers? = nil,
    notifications: NotificationFields? = nil, passed: ChunkResult? = nil,
    into result: inout ChunkResult
  ) {
    let throttled = throttled ?? .none
    withNotes(writeLines ? notifications : nil) {
      if let passed, writeLines || output == .counts {
        writeDelivered(batch, messages, passed: passed, throttled: throttled, &result)
      } else {
        evaluateMessages(batch, messages, throttled, &result)
      }
    }
    moveScratchCounters(into: &result)
  }

  /// Runs `body` with the batch's notification fields, if any, in view
  /// (`notes`) for the lines it writes.
  private func withNotes(_ notifications: NotificationFields?, _ body: () -> Void) {
    guard let notifications else { return body() }
    notifications.withView { view in
      writesNotes = true
      notes = view
      defer {
        writesNotes = false
        notes = .empty
      }
      body()
    }
  }

  /// Adds the counts kept in scratch space (per gateway, per reason) to
  /// `result`'s counters, and zeroes them.
  func moveScratchCounters(into result: inout ChunkResult) {
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

  private func evaluateMessages(
    _ batch: MessageBatch, _ messages: Range<Int>, _ throttled: ThrottledMembers,
    _ result: inout ChunkResult
  ) {
    batch.mentions.withUnsafeBufferPointer { mentions in
      batch.channel.withUnsafeBufferPointer { channels in
        batch.sender.withUnsafeBufferPointer { senders in
          throttled.users.withUnsafeBufferPointer { throttledUsers in
            for m in messages {
              prefetch(channels, senders, ahead: m, end: messages.upperBound)
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
    }
  }

  func evaluateMessage(
    _ batch: MessageBatch, _ m: Int, _ mentions: UnsafeBufferPointer<Int32>,
    _ throttled: SortedCursor, _ result: inout ChunkResult
  ) {
    // Silent messages and calls have no pair with trigger 'message'.
    if recordCandidates && (batch.silent[m] || batch.kind[m] == .call) {
      result.delivered.endMessage()
      return
    }
    stamp += 1
    let c = columns
    let channel = Int(batch.channel[m])
    let members = c.channelMembers[channel]..<c.channelMembers[channel + 1]
    let terms = terms(batch, m, channel: channel)
    let sender = batch.sender[m]
    var singledOut = singledOut(batch, m, channel, mentions, throttled)
    // A silent message decides every pair by rule 0: nothing to share.
    if members.count >= sharingThreshold && !terms.silent && metBefore(channel) {
      evaluateAlike(channel, members, terms, sender, singledOut, &result)
      return
    }

    if writeLines { buildLinePrefix(batch, m, channel) }
    if writeDecisions { buildDecisionPrefix(batch, m) }
    var pairs = 0
    var delivered = 0
    if writesNotes { noteCursor = Int(notes.starts[m])..<Int(notes.starts[m &+ 1]) }
    if recordOutcomes { scratch.reserveMessagePairs(members.count) }

    for slot in members {
      prefetchUser(slot &+ Self.membersAhead, before: members.upperBound)
      if writeLines {
        prefetchDeviceOffsets(slot &+ Self.deviceOffsetsAhead, before: members.upperBound)
        prefetchDeviceLines(slot &+ Self.deviceLinesAhead, before: members.upperBound)
      }
      let u = c.memberUser[slot]
      if u == sender { continue }
      pairs &+= 1
      let pair = singledOut.terms(for: u)
      let verdict = evaluatePair(slot, u, terms, pair, sign: 1, &result)
      if verdict.reason == nil { delivered &+= 1 }
      if verdict.reason == nil
        && (recordDelivered || (recordCandidates && verdict.trigger == .message))
      {
        result.delivered.append(slot: slot, user: u, verdict)
      }
      if writeDecisions { appendDecision(user: Int(u), verdict, ts: terms.ts, &result) }
      if recordOutcomes {
        let n = pairs &- 1  // the pair's place in the message
        scratch.messageUsers[n] = u
        (scratch.messageOutcomes[n], scratch.messageDeliveryHours[n]) = Self.outcome(
          verdict, ts: terms.ts)
        if recordsLocalHours {
          // (The user's record is in cache: the pair's rules just read it.)
          let zone = Int(c.userState[Int(u)].zone)
          scratch.messageLocalHours[n] =
            UInt8(truncatingIfNeeded: localMinute(zone: zone, terms.ts) % 1440 / 60)
        }
      }
      if recordDevices {
        result.pairDeliverAt.append(verdict.deliverAt)
        result.pairDeviceEnds.append(Int32(result.pairDevices.count))
      }
    }
    if recordOutcomes {
      scratch.appendMessagePairs(pairs, localHours: recordsLocalHours, to: &result)
    }
    if recordCandidates || recordDelivered { result.delivered.endMessage() }
    result.counters.messages += 1
    result.counters.pairs += pairs
    result.counters.delivered += delivered

    if writeLines { closeGatewayLines(&result) }
  }

  /// What message `m` of `batch`, in channel row `channel`, asks of every member.
  @inline(__always)
  func terms(_ batch: MessageBatch, _ m: Int, channel: Int) -> Terms {
    Terms(
      ts: batch.ts[m], kind: batch.kind[m], force: batch.force[m], silent: batch.silent[m],
      mentionAll: batch.mentionAll[m] && index.mentionAllApplies(in: channel),
      category: Int(batch.category[m]), defaultChat: columns.channelDefaultChat[channel])
  }

  /// A pair's outcome and the UTC hour it is delivered at (its message's,
  /// at `ts`, unless deferral or presence delay a delivered pair).
  @inline(__always)
  static func outcome(_ verdict: Verdict, ts: Int64) -> (Outcome, UInt8) {
    let outcome = verdict.reason.map(Outcome.suppressed) ?? .delivered(verdict.trigger)
    let at = verdict.reason == nil && verdict.deliverAt > ts ? verdict.deliverAt : ts
    return (outcome, UInt8(LocalTime.utcHour(millis: at)))
  }

  /// The members message `m` singles out: its mentions and reply_to, the
  /// users who muted its sender, those with a level for its thread here,
  /// those rule 8 throttles.
  @inline(__always)
  func singledOut(
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
      muters: SortedCursor(c.muters, muterRows(of: batch.sender[m])),
      threadUsers: SortedCursor(c.threadUsers, threadRows), threadLevels: c.threadLevels,
      throttled: throttled)
  }

  /// The rule chain for one pair, tallied into the counters `sign` times
  /// (−1 takes a pair back out of a channel share's counts). With lines on, appends
  /// the pair's deliveries.
  @inline(__always)
  func evaluatePair(
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
      findPairNote(u)
      if writeLines {
        makeRecipientTail(trigger: trigger, preview: settings.showPreview, deferredTo: deferredTo)
      }
      let (devices, passed) = gateDevices(
        user: u, state, category: terms.category, delivering: !throttled, countsBlocked: true,
        sign: sign, &result)
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

  /// The gateway gate for each of user row `u`'s devices (`state` its
  /// record) for a pair that reached it: each device that passes gets the
  /// pair's delivery if `delivering` (rule 8 may withhold it), each blocked
  /// one is counted if `countsBlocked`.
  @inline(__always)
  func gateDevices(
    user u: Int32, _ state: UserState, category: Int, delivering: Bool, countsBlocked: Bool,
    sign: Int, _ result: inout ChunkResult
  ) -> (devices: Int, passed: Int) {
    let c = columns
    let devices = c.deviceCount(user: Int(u), state)
    var passed = 0
    for k in 0..<devices {
      let (g, restricted) = c.deviceGate(k, state)
      if passesGate(gateway: g, restricted: restricted, user: Int(u), state, category: category) {
        if recordDevices && delivering {
          result.pairDevices.append(state.firstDevice &+ Int32(k))
          result.pairDeviceGateways.append(UInt16(truncatingIfNeeded: g))
        }
        if delivering {
          appendDelivery(device: Int(state.firstDevice) &+ k, gateway: g, sign: sign, &result)
        }
        passed &+= 1
      } else if countsBlocked {
        scratch.blocked[g] &+= sign
      }
    }
    return (devices, passed)
  }

  /// The membership slot of user row `u` in `members` (ordered by user row), if any.
  func slot(of u: Int32, in members: Range<Int>) -> Int? {
    guard u >= 0 else { return nil }
    var lo = members.lowerBound
    var hi = members.upperBound
    while lo < hi {
      let mid = (lo &+ hi) &>> 1
      if columns.memberUser[mid] < u { lo = mid &+ 1 } else { hi = mid }
    }
    return lo < members.upperBound && columns.memberUser[lo] == u ? lo : nil
  }

  /// The local minute of the week of the current message's ts in `zone`,
  /// computed once per zone and message.
  @inline(__always)
  func localMinute(zone: Int, _ ts: Int64) -> Int {
    if scratch.zoneStamp[zone] != stamp { cacheLocalMinute(zone: zone, ts: ts) }
    return scratch.zoneMinute[zone]
  }

  @inline(never)
  func cacheLocalMinute(zone: Int, ts: Int64) {
    scratch.zoneStamp[zone] = stamp
    var span = scratch.zoneSpan[zone]
    if ts < span.from || ts >= span.until {
      span = index.zones[zone].offsetSpan(atMillis: ts)
      scratch.zoneSpan[zone] = span
    }
    scratch.zoneMinute[zone] = LocalTime.minuteOfWeek(utcMillis: ts, offsetSeconds: span.offset)
  }

  /// Whether one device passes the gateway gate (`gateVerdict`).
  @inline(__always)
  func passesGate(
    gateway g: Int, restricted: Bool, user u: Int, _ state: UserState, category cat: Int
  ) -> Bool {
    gateVerdict(gateway: g, restricted: restricted, user: u, state, category: cat).passes
  }

}
