import FanoutEngine
import FanoutIndex
import FanoutKernel
import FanoutModel
import FanoutOutput
import FanoutTime
import FanoutTraffic

/// What comparing one chunk of messages produced; merged in chunk order.
struct ComparedChunk: Sendable {
  /// A's tally, then each B's.
  var sides: [SideChunk] = []
  /// Per B: its pairs against A's.
  var changes: [PairChanges] = []
  /// Per message of the chunk: its channel row.
  var messageChannels: [Int32] = []
  /// The first and last message's ts, for the days the traffic spans.
  var firstTs = Int64.max
  var lastTs = Int64.min
}

/// One side's pairs of a chunk, counted. A B tallied relative to A
/// (`ChunkComparer.relative`) holds B's counts minus A's: a pair with A's
/// outcome and delivery hour adds nothing, so most of its pairs cost one
/// compare.
struct SideChunk: Sendable {
  /// Always the side's own (never relative).
  var counters: Counters
  var slices = SideSlices()
  /// Per message: its delivered pairs.
  var messageDelivered: [Int32] = []
  /// The user row of every delivered pair, and (relative only) of every
  /// pair A delivered that B does not.
  var deliveredUsers: [Int32] = []
  var undeliveredUsers: [Int32] = []

  init(counters: Counters) { self.counters = counters }
}

/// One B's pairs against A's in a chunk.
struct PairChanges: Sendable {
  /// `Outcome.allCases.count²` cells, row = A's outcome, column = B's.
  var transitions = [Int](repeating: 0, count: Outcome.allCases.count * Outcome.allCases.count)
  /// `changes.ndjson.lz4` blocks for the changed pairs.
  var changeBlocks: [UInt8] = []
  var changedPairs = 0
  /// Every pair whose outcome changed: its user row, its channel row and
  /// its traffic line (the top users' and channels' examples).
  var changedUsers: [Int32] = []
  var changedChannels: [Int32] = []
  var changedLines: [Int] = []
}

/// Evaluates chunks against A and each B (one for `fanout whatif`, one per
/// variant for a sweep) and compares each B with A pair by pair: A is
/// evaluated and tallied once. All indexes have the same users, channels
/// and categories (checked before), so one parsed batch and one set of
/// rows serve them all. Each worker keeps an evaluator per index for the run.
struct ChunkComparer: ChunkWork {
  /// A, then the Bs.
  let indexes: [Index]
  /// Per B: whether each pair falls in the same slices on both sides (the
  /// same time zones, channel kinds and channel sizes), so that B is
  /// tallied as its difference from A.
  let relative: [Bool]
  /// Per side: whether it differs from A only in deferring pairs A drops
  /// in quiet time (`Index.defersMoreThan`), so that it decides again only
  /// the pairs A dropped so (`Evaluator.redecideQuietPairs`).
  let defersMoreThanA: [Bool]
  /// Per side: whether it is A's pass before the ledgers with only a
  /// throttle of its own (A has none), so that it lists only the pairs
  /// its throttle takes (`Evaluator.listThrottled`).
  let throttlesA: [Bool]
  /// Per side: whether it decides again only some of A's pairs (it
  /// defers more than A, changes only quiet hours, or only throttles A's
  /// pairs), holding only those it decides otherwise
  /// (`ChunkResult.redecidedPairs`).
  let redecides: [Bool]
  /// The sides that change only users' quiet hours from A, and those
  /// changes (`QuietHoursChange`): they decide again only those users'
  /// pairs where their quiet hours differ, all in one walk
  /// (`Evaluator.redecideQuietHours`).
  let quietHoursSides: [Int]
  let quietHoursChanges: QuietHoursChanges

  /// - Parameter sharingAllowed: false evaluates and tallies every B
  ///   whole (the tests' check that both ways agree).
  init(indexes: [Index], sharingAllowed: Bool = true) {
    self.indexes = indexes
    relative = indexes.dropFirst().map { sharingAllowed && Self.sameSlices(indexes[0], $0) }
    // (A side that decides again only some of A's pairs holds only those
    // it decides otherwise: it is tallied relative to A.)
    let defersMoreThanA = indexes.enumerated().map { [relative] side, index in
      side > 0 && relative[side - 1] && index.defersMoreThan(indexes[0])
    }
    self.defersMoreThanA = defersMoreThanA
    let quietHours = indexes.enumerated().compactMap { [relative] side, index in
      side > 0 && relative[side - 1] && !defersMoreThanA[side]
        ? QuietHoursChange(index, from: indexes[0]).map { (side, $0) } : nil
    }
    quietHoursSides = quietHours.map(\.0)
    quietHoursChanges = QuietHoursChanges(quietHours.map(\.1))
    throttlesA = indexes.enumerated().map { [relative] side, index in
      side > 0 && relative[side - 1] && indexes[0].settings.throttle == nil
        && index.decidesAlikeBeforeLedgers(indexes[0])
    }
    redecides = indexes.indices.map { [throttlesA, quietHoursSides] side in
      defersMoreThanA[side] || quietHoursSides.contains(side) || throttlesA[side]
    }
  }

  var empty: ComparedChunk { ComparedChunk() }

  /// About how many pairs each side evaluates before the next side does:
  /// their members' rows fit in a core's L2 cache (at 1M users, a sweep of
  /// five spent 15% less CPU than with each side evaluating the whole
  /// chunk; 256 and 4,096 did no better).
  static let sidePairs = 1024

  /// Per side, an evaluator and the result it fills, reused chunk after
  /// chunk (a fresh result per chunk faults in fresh pages).
  struct Worker {
    var evaluators: [Evaluator]
    var results: [ChunkResult]
    /// Per side of `quietHoursSides`: its evaluator (of `evaluators`), and
    /// an evaluator of A's index that takes A's decisions of its pairs
    /// back, in its counts alone.
    let quietHoursEvaluators: [Evaluator]
    let takingBack: [Evaluator]
    /// The changed pairs' lines of one comparison, before compression.
    let changeLines = ByteScratchBox(capacity: 1 << 16)
  }

  func makeWorker() -> Worker {
    let evaluators = indexes.enumerated().map { side, index in
      let evaluator = Evaluator(index: index, output: .outcomes)
      evaluator.recordsLocalHours = recordsLocalHours(side)
      return evaluator
    }
    return Worker(
      evaluators: evaluators, results: indexes.map { ChunkResult(gateways: $0.gateways.count) },
      quietHoursEvaluators: quietHoursSides.map { evaluators[$0] },
      takingBack: quietHoursSides.map { _ in Evaluator(index: indexes[0], output: .outcomes) })
  }

  /// Only the sides tallied whole count their pairs' local hours.
  private func recordsLocalHours(_ side: Int) -> Bool { side == 0 || !relative[side - 1] }

  /// A side with ledgers (rule 8, contract v3) keeps its ledgers' pass's
  /// outcomes: only rule 8 is then left to apply (`evaluate`).
  func ledgerPass(side: Int) -> LedgerPass { .outcomes(localHours: recordsLocalHours(side)) }

  /// A B whose SQL changed only what the ledgers read (rule 8's throttle,
  /// contract v3's groups) takes A's pass before them as its own: it is
  /// then never evaluated at all, only judged.
  func sharesFirstPass(side: Int) -> Bool { indexes[side].decidesAlikeBeforeLedgers(indexes[0]) }

  /// Whether every pair's slices are the same in `a` and `b`.
  static func sameSlices(_ a: Index, _ b: Index) -> Bool {
    a === b
      || (a.zones.map(\.name) == b.zones.map(\.name)
        && a.userZone.elementsEqual(b.userZone) && a.channelScope == b.channelScope
        && a.channelMembers.elementsEqual(b.channelMembers))
  }

  func evaluate(
    _ batch: MessageBatch, messages: Range<Int>, verdicts: [LedgerVerdicts],
    worker: inout Worker
  ) -> ComparedChunk {
    // A side with ledgers was evaluated in their pass, without rule 8:
    // its verdicts complete those outcomes (or, over an A without a
    // throttle, list the pairs they take). A side that decides again only
    // some of A's pairs (it defers more, or changes only quiet hours)
    // starts empty and lists those it decides otherwise (below). The
    // others are evaluated here.
    var evaluatedSides: [Int] = []
    for side in indexes.indices {
      if let result = verdicts[side].evaluated[messages.lowerBound] {
        if throttlesA[side] {
          worker.results[side].removeAll()
          worker.evaluators[side].listThrottled(
            verdicts[side].throttled, batch, messages: messages, decidedBy: result,
            into: &worker.results[side])
        } else {
          worker.results[side] = result
          worker.evaluators[side].applyThrottle(
            verdicts[side].throttled, batch, messages: messages, to: &worker.results[side])
        }
      } else {
        worker.results[side].removeAll()
        if !redecides[side] { evaluatedSides.append(side) }
      }
    }
    // The sides that decide again some of A's pairs from A's decisions
    // (other quiet hours, deferral) did so beside A's pass, if A had one.
    let decidedBeside = verdicts[0].decidedBeside[messages.lowerBound]
    if let decidedBeside {
      for side in indexes.indices where redecidesFromA(side) {
        worker.results[side] = decidedBeside[side]
      }
    }
    // The slices of A's messages, for every side tallied in them (first:
    // the messages' channel rows are then in cache for the loop below).
    let keysOfA = MessageSlices(batch, messages, indexes[0])
    // Every side evaluates a few messages before the next side does: the
    // members, settings and users the sides share are still in cache.
    for block in blocks(batch, messages) {
      for side in evaluatedSides {
        worker.evaluators[side].evaluate(
          batch, messages: block, verdicts: verdicts[side], into: &worker.results[side])
      }
      if decidedBeside == nil && redecidesFromA {
        var results: [ChunkResult] = []
        swap(&results, &worker.results)
        redecide(batch, block, from: results[0], into: &results, worker)
        swap(&results, &worker.results)
      }
    }
    for side in indexes.indices where redecides[side] {
      worker.results[side].counters.add(worker.results[0].counters)
    }
    let results = worker.results
    var chunk = ComparedChunk()
    for m in messages {
      chunk.messageChannels.append(batch.channel[m])
      chunk.firstTs = min(chunk.firstTs, batch.ts[m])
      chunk.lastTs = max(chunk.lastTs, batch.ts[m])
    }
    chunk.sides.append(tally(messages, results[0], keysOfA))
    let outcomesOfA = redecides.contains(true) ? outcomeCounts(results[0]) : []
    for b in 1..<indexes.count {
      let relative = relative[b - 1]
      var side =
        relative
        ? SideChunk(counters: results[b].counters)
        : tally(messages, results[b], MessageSlices(batch, messages, indexes[b]))
      chunk.changes.append(
        redecides[b]
          ? compareRedecided(
            batch, messages, a: results[0], outcomesOfA, b: results[b], slices: keysOfA,
            into: &side, lines: worker.changeLines)
          : compare(
            batch, messages, a: results[0], b: results[b], relative: relative ? keysOfA : nil,
            into: &side, lines: worker.changeLines))
      chunk.sides.append(side)
    }
    return chunk
  }

  /// A's pass before the ledgers (where other sides take it as theirs),
  /// block by block, each block's pairs decided again right after by the
  /// sides that decide some of A's pairs from A's decisions: A's rows are
  /// then in cache, where after the pass of a whole wave they were not.
  func firstPass(
    _ batch: MessageBatch, messages: Range<Int>, finder: Evaluator, worker: inout Worker
  ) -> (ChunkResult, beside: [ChunkResult]) {
    var a = ChunkResult(gateways: indexes[0].gateways.count)
    guard redecidesFromA else {
      finder.evaluate(batch, messages: messages, into: &a)
      return (a, [])
    }
    var results = indexes.map { ChunkResult(gateways: $0.gateways.count) }
    for block in blocks(batch, messages) {
      finder.evaluate(batch, messages: block, into: &a)
      redecide(batch, block, from: a, into: &results, worker)
    }
    return (a, results)
  }

  /// Whether some side decides again some of A's pairs from A's decisions.
  private var redecidesFromA: Bool { !quietHoursSides.isEmpty || defersMoreThanA.contains(true) }

  private func redecidesFromA(_ side: Int) -> Bool {
    defersMoreThanA[side] || quietHoursSides.contains(side)
  }

  /// The chunk's messages in blocks of about `sidePairs` pairs.
  private func blocks(_ batch: MessageBatch, _ messages: Range<Int>) -> [Range<Int>] {
    var blocks: [Range<Int>] = []
    var start = messages.lowerBound
    while start < messages.upperBound {
      var end = start
      var pairs = 0
      while end < messages.upperBound && pairs < Self.sidePairs {
        pairs &+= indexes[0].memberCount(of: Int(batch.channel[end]))
        end &+= 1
      }
      blocks.append(start..<end)
      start = end
    }
    return blocks
  }

  /// The sides that decide again some of A's pairs from A's decisions
  /// (`a`, up to `block`'s end) decide those of `block`, into their
  /// `results` (per side).
  private func redecide(
    _ batch: MessageBatch, _ block: Range<Int>, from a: ChunkResult,
    into results: inout [ChunkResult], _ worker: Worker
  ) {
    if !quietHoursSides.isEmpty {
      var quietHoursResults = quietHoursSides.map { _ in ChunkResult(gateways: 0) }
      for (k, side) in quietHoursSides.enumerated() { swap(&quietHoursResults[k], &results[side]) }
      worker.evaluators[0].redecideQuietHours(
        batch, messages: block, decided: a, changes: quietHoursChanges,
        sides: worker.quietHoursEvaluators, takingBack: worker.takingBack,
        into: &quietHoursResults)
      for (k, side) in quietHoursSides.enumerated() { swap(&quietHoursResults[k], &results[side]) }
    }
    for side in indexes.indices where defersMoreThanA[side] {
      worker.evaluators[side].redecideQuietPairs(
        batch, messages: block, decidedBy: a, into: &results[side])
    }
  }

  /// One side's own tally of its pairs.
  private func tally(
    _ messages: Range<Int>, _ result: ChunkResult, _ slices: MessageSlices
  ) -> SideChunk {
    var side = SideChunk(counters: result.counters)
    var tally = SideTally(slices)
    var start = 0
    for k in 0..<messages.count {
      tally.begin(message: k)
      let end = Int(result.messagePairEnds[k])
      for i in start..<end {
        tally.count(
          result.pairUsers[i], result.pairOutcomes[i], localHour: result.pairLocalHours[i],
          deliveryHour: result.pairDeliveryHours[i], by: 1, into: &side)
      }
      start = end
      tally.end(into: &side)
    }
    return side
  }

  /// One B's pairs against A's: the transitions and changed pairs and,
  /// when B is tallied relative to A (in A's message `slices`), B's tally
  /// minus A's into `side`. `lines` is scratch space for the changed
  /// pairs' lines.
  private func compare(
    _ batch: MessageBatch, _ messages: Range<Int>, a: ChunkResult, b: ChunkResult,
    relative slices: MessageSlices?, into side: inout SideChunk, lines: ByteScratchBox
  ) -> PairChanges {
    let width = Outcome.allCases.count
    var transitions = [Int](repeating: 0, count: width * width)
    var changes = PairChanges()
    // Per changed pair, its transition and message, for its line.
    var changedTransitions: [UInt16] = []
    var changedMessages: [Int32] = []
    var tally = slices.map(SideTally.init)
    var i = 0
    var j = 0
    for (k, m) in messages.enumerated() {
      let channel = Int(batch.channel[m])
      tally?.begin(message: k)
      // Walk both pair lists (each in user row order) together; a user in
      // one list only is a membership that the other snapshot lacks.
      let endA = Int(a.messagePairEnds[k])
      let endB = Int(b.messagePairEnds[k])
      while i < endA || j < endB {
        let userA = i < endA ? a.pairUsers[i] : Int32.max
        let userB = j < endB ? b.pairUsers[j] : Int32.max
        if userA == userB && a.pairOutcomes[i] == b.pairOutcomes[j]
          && a.pairDeliveryHours[i] == b.pairDeliveryHours[j]
        {
          // The same pair on both sides: most pairs.
          transitions[Int(a.pairOutcomes[i].rawValue) &* (width &+ 1)] &+= 1
          i &+= 1
          j &+= 1
          continue
        }
        let user = min(userA, userB)
        var outcomeA = Outcome.notMember
        var outcomeB = Outcome.notMember
        // Relative, both sides have the same members and zones: the pair's
        // local hour is A's (B's evaluator does not record it).
        let localHour = tally != nil && i < endA ? a.pairLocalHours[i] : 0
        if userA == user {
          outcomeA = a.pairOutcomes[i]
          tally?.count(
            user, outcomeA, localHour: localHour, deliveryHour: a.pairDeliveryHours[i],
            by: -1, into: &side)
          i &+= 1
        }
        if userB == user {
          outcomeB = b.pairOutcomes[j]
          tally?.count(
            user, outcomeB, localHour: localHour, deliveryHour: b.pairDeliveryHours[j],
            by: 1, into: &side)
          j &+= 1
        }
        let transition = Int(outcomeA.rawValue) &* width &+ Int(outcomeB.rawValue)
        transitions[transition] &+= 1
        guard outcomeA != outcomeB else { continue }
        changes.changedUsers.append(user)
        changes.changedChannels.append(Int32(channel))
        changes.changedLines.append(batch.lines[m])
        changedTransitions.append(UInt16(transition))
        changedMessages.append(Int32(m))
      }
      tally?.end(into: &side)
    }
    changes.transitions = transitions
    writeLines(batch, changedMessages, changedTransitions, into: &changes, lines)
    return changes
  }

  /// A's pairs per outcome (`Outcome.rawValue`).
  private func outcomeCounts(_ a: ChunkResult) -> [Int] {
    var counts = [Int](repeating: 0, count: Outcome.allCases.count)
    for outcome in a.pairOutcomes { counts[Int(outcome.rawValue)] &+= 1 }
    return counts
  }

  /// A B that decided again only some of A's pairs (`ChunkResult.
  /// redecidedPairs`) against A: every other pair is A's, the same on both
  /// sides, so only those listed are compared and tallied (relative to A,
  /// in A's message `slices`), as `compare` would.
  private func compareRedecided(
    _ batch: MessageBatch, _ messages: Range<Int>, a: ChunkResult, _ outcomesOfA: [Int],
    b: ChunkResult, slices: MessageSlices, into side: inout SideChunk, lines: ByteScratchBox
  ) -> PairChanges {
    let width = Outcome.allCases.count
    var changes = PairChanges()
    // Every pair as A's, on the diagonal; each one listed moves out of it.
    for (outcome, pairs) in outcomesOfA.enumerated() {
      changes.transitions[outcome &* (width &+ 1)] = pairs
    }
    var changedTransitions: [UInt16] = []
    var changedMessages: [Int32] = []
    var tally = SideTally(slices)
    var r = 0
    for (k, m) in messages.enumerated() {
      tally.begin(message: k)
      let end = Int(a.messagePairEnds[k])
      while r < b.redecidedPairs.count && Int(b.redecidedPairs[r]) < end {
        let i = Int(b.redecidedPairs[r])
        let (outcomeA, outcomeB) = (a.pairOutcomes[i], b.redecidedOutcomes[r])
        let user = a.pairUsers[i]
        let localHour = a.pairLocalHours[i]
        tally.count(
          user, outcomeA, localHour: localHour, deliveryHour: a.pairDeliveryHours[i], by: -1,
          into: &side)
        tally.count(
          user, outcomeB, localHour: localHour, deliveryHour: b.redecidedDeliveryHours[r],
          by: 1, into: &side)
        r &+= 1
        let transition = Int(outcomeA.rawValue) &* width &+ Int(outcomeB.rawValue)
        changes.transitions[Int(outcomeA.rawValue) &* (width &+ 1)] &-= 1
        changes.transitions[transition] &+= 1
        guard outcomeA != outcomeB else { continue }
        changes.changedUsers.append(user)
        changes.changedChannels.append(batch.channel[m])
        changes.changedLines.append(batch.lines[m])
        changedTransitions.append(UInt16(transition))
        changedMessages.append(Int32(m))
      }
      tally.end(into: &side)
    }
    writeLines(batch, changedMessages, changedTransitions, into: &changes, lines)
    return changes
  }

  /// The changed pairs' lines, compressed into `changes`, with their
  /// count. Their users are scattered rows: each user's id is asked for
  /// ahead (its offsets, then its bytes), or every line would wait for two
  /// cache misses. (Written into a scratch buffer: an array's appends
  /// retained and checked its storage, a tenth of a 1M sweep's lines'
  /// time.)
  private func writeLines(
    _ batch: MessageBatch, _ messages: [Int32], _ transitions: [UInt16],
    into changes: inout PairChanges, _ buffer: ByteScratchBox
  ) {
    let users = changes.changedUsers
    changes.changedPairs = users.count
    var lines = buffer.scratch
    defer { buffer.scratch = lines }  // (its storage, if it grew)
    lines.removeAll()
    // Views valid while `batch` and `indexes` are held (for the whole call).
    let ids = batch.idJSON.view
    let userJSON = indexes[0].userJSON.view
    let (keys, ends) = (Self.lineKeys, Self.changeEnds)  // (read once: lazily made statics)
    for n in users.indices {
      if n &+ 16 < users.count { userJSON.prefetchOffsets(Int(users[n &+ 16])) }
      if n &+ 8 < users.count { userJSON.prefetchBytes(Int(users[n &+ 8])) }
      lines.append(contentsOf: keys[0])
      lines.append(contentsOf: ids[Int(messages[n])])
      lines.append(contentsOf: keys[1])
      lines.append(contentsOf: userJSON[Int(users[n])])
      lines.append(contentsOf: ends[Int(transitions[n])])
    }
    changes.changeBlocks = LZ4Frame.blocks(UnsafeRawBufferPointer(lines.bytes))
    withExtendedLifetime(batch) {}
  }

  /// A change line is `{"message":ID,"user":ID,"a":"A","b":"B"}`.
  private static let lineKeys = FixedStrings([#"{"message":"#, #","user":"#])
  /// Per transition (A's outcome × B's), the line's end.
  private static let changeEnds = FixedStrings(
    Outcome.allCases.flatMap { a in
      Outcome.allCases.map { b in #","a":"\#(a.name)","b":"\#(b.name)"}"# + "\n" }
    })
}

/// Per message of a chunk, the slices all its pairs share: its channel's
/// kind and size in one index, its UTC hour. Found once per chunk and
/// index: the channel's rows are a cache miss a message.
struct MessageSlices {
  var kind: [Int32] = []
  var size: [Int32] = []
  var utcHour: [Int32] = []

  init(_ batch: MessageBatch, _ messages: Range<Int>, _ index: Index) {
    let scopes = index.channelScope
    for m in messages {
      let channel = Int(batch.channel[m])
      kind.append(Int32(Slice.kinds + Int(scopes[channel].rawValue)))
      size.append(Int32(Slice.sizes + Slice.sizeBucket(members: index.memberCount(of: channel))))
      utcHour.append(Int32(Slice.utcHours + LocalTime.utcHour(millis: batch.ts[m])))
    }
  }
}

/// Counts one side's pairs of the current message into its slices.
private struct SideTally {
  let slices: MessageSlices
  /// `Slice`'s offsets, read once: each read of a lazily made static checks
  /// that it is made, a call per pair.
  private let localHours = Slice.localHours
  private let deliveryHours = Slice.deliveryHours
  var message = 0
  /// The current message's pairs counted so far, delivered and not (with
  /// their sign): its kind, size and UTC hour slices take them at `end`.
  var delivered: Int32 = 0
  var suppressed = 0

  init(_ slices: MessageSlices) { self.slices = slices }

  /// Starts the chunk's `k`th message.
  mutating func begin(message k: Int) {
    message = k
    delivered = 0
    suppressed = 0
  }

  /// Counts a pair into `side`; `sign` -1 takes it away.
  @inline(__always)
  mutating func count(
    _ user: Int32, _ outcome: Outcome, localHour: UInt8, deliveryHour: UInt8, by sign: Int,
    into side: inout SideChunk
  ) {
    let isDelivered = outcome.isDelivered
    side.slices.count(localHours + Int(localHour), delivered: isDelivered, by: sign)
    side.slices.count(deliveryHours + Int(deliveryHour), delivered: isDelivered, by: sign)
    guard isDelivered else {
      suppressed &+= sign
      return
    }
    delivered &+= Int32(truncatingIfNeeded: sign)
    if sign > 0 {
      side.deliveredUsers.append(user)
    } else {
      side.undeliveredUsers.append(user)
    }
  }

  /// Counts the current message's pairs into the slices every pair of it
  /// shares (its channel's kind and size, its UTC hour).
  mutating func end(into side: inout SideChunk) {
    // Three calls, not a loop over an array literal: no array a message.
    let (pairs, suppressed) = (Int(delivered), suppressed)
    side.slices.count(Int(slices.kind[message]), delivered: pairs, suppressed: suppressed)
    side.slices.count(Int(slices.size[message]), delivered: pairs, suppressed: suppressed)
    side.slices.count(Int(slices.utcHour[message]), delivered: pairs, suppressed: suppressed)
    side.messageDelivered.append(delivered)
  }
}
