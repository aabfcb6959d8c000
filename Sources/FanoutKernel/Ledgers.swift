import FanoutIndex
import FanoutModel
import Glibc

/// The input-order rules of one index: rule 8's throttle and contract v3's
/// notifications. Their verdicts depend on earlier lines, so they cannot be
/// made while a wave's chunks are evaluated in parallel; they are made in
/// between, in three steps:
///
/// 1. the wave's chunks are evaluated in parallel without rule 8, keeping
///    only each message's delivered pairs (`DeliveredPairs`) — one pass
///    for both ledgers;
/// 2. the throttle's partitions (by channel) walk its candidates in input
///    order and throttle or count them (`ThrottleJudge`); then the
///    notification ledger's partitions (by user) walk the pairs rule 8
///    leaves, and the read lines, in input order (`NotificationJudge`);
/// 3. the caller evaluates the wave with what they found
///    (`LedgerVerdicts`): the evaluator singles the throttled members out
///    and writes the notifications' fields. Delivery lines alone, or
///    counts, are made from the pass's delivered pairs and counts
///    (`LedgerPass.deliveries`): only rule 8 can still take a delivered
///    pair away, and no other pair can be delivered.
///
/// What they find depends only on the lines and their order: the same for
/// any number of threads, chunks or batches.
public final class Ledgers {
  public let index: Index
  /// Rule 8, when the index sets a throttle (and judges it alone).
  public let throttle: ThrottleJudge?
  /// Rule 8 judged in one walk with other what-if sides' throttles
  /// (`ThrottleGroup`): the group, and this index's place in it.
  private let sharedThrottle: (group: ThrottleGroup, place: Int)?
  /// Contract v3, when the index turns notification groups on.
  public let notifications: NotificationJudge?
  /// The pass before these ledgers (a caller may share it with others).
  public let pass: PassBeforeLedgers

  /// The ledgers `index` needs, fresh; nil when it needs none.
  ///
  /// - Parameters:
  ///   - throttleRetention: see `ThrottleLedger`.
  ///   - pass: what the pass before them keeps of each chunk.
  ///   - sharedThrottle: the group that judges this index's throttle
  ///     with others' (`ThrottleGroup`), and its place there.
  public init?(
    index: Index, threads: Int, throttleRetention: Int64? = nil,
    pass: LedgerPass = .deliveredPairs, sharedThrottle: (group: ThrottleGroup, place: Int)? = nil
  ) {
    let threads = max(1, threads)
    let partitions = Self.partitions(threads: threads)
    self.sharedThrottle = sharedThrottle
    throttle =
      sharedThrottle != nil
      ? nil
      : index.settings.throttle.map {
        ThrottleJudge(
          index: index, throttle: $0, threads: partitions, retention: throttleRetention)
      }
    notifications =
      pass.readsNotifications
      ? index.settings.notificationGroups.map {
        NotificationJudge(index: index, caps: $0, threads: partitions)
      } : nil
    guard throttle != nil || sharedThrottle != nil || notifications != nil else { return nil }
    self.index = index
    // Rule 8 alone needs only the pairs with trigger 'message'.
    self.pass = PassBeforeLedgers(
      index: index, threads: threads, pass, candidatesOnly: notifications == nil)
  }

  /// The partitions (and walking threads) of the ledgers for `threads`
  /// workers: no more than the cores, or 4 — each partition reads every
  /// pair of a run to find its own, and each has pools of its own, so
  /// `--threads 1024` on two cores walked 1,024 partitions on two threads
  /// (at least 4 keep the tests' runs of 3 threads, on two cores, moving
  /// ledgers between partition counts). What the ledgers find does not
  /// depend on it.
  static func partitions(threads: Int) -> Int {
    min(threads, max(4, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN)))))
  }

  /// Carries `previous`'s ledgers (of the snapshot this index replaces)
  /// over, by user id and channel id: see `ThrottleJudge.inherit` and
  /// `NotificationJudge.inherit`.
  public func inherit(from previous: Ledgers) {
    if let throttle, let old = previous.throttle { throttle.inherit(from: old) }
    if let notifications, let old = previous.notifications { notifications.inherit(from: old) }
  }

  /// What the ledgers find for `batches`, which `plan` cuts into chunks in
  /// input order: per batch, the members rule 8 throttles; contract v3's
  /// notifications; with `LedgerPass.outcomes` or `.deliveries`, per
  /// chunk, its evaluation without rule 8 (else empty). Updates the ledgers.
  ///
  /// - Parameter evaluated: the chunks evaluated without rule 8 already,
  ///   by an index whose rules 0–7 decide as this one's
  ///   (`Index.decidesAlikeBeforeLedgers`), with `LedgerPass.outcomes`;
  ///   nil to run the pass here.
  public func judge(
    _ batches: [MessageBatch], plan: [(batch: Int, messages: Range<Int>)],
    evaluated: [ChunkResult]? = nil
  ) -> (throttled: [ThrottledMembers], notifications: NotificationWave?, evaluated: [ChunkResult]) {
    var evaluated = evaluated ?? pass.run(batches, plan: plan)
    let delivered = evaluated.map(\.delivered)
    if !pass.keepsResults { evaluated = [] }
    let throttled =
      sharedThrottle.map { $0.group.verdicts($0.place, batches, plan: plan, delivered: delivered) }
      ?? throttle?.judge(batches, plan: plan, delivered: delivered)
      ?? [ThrottledMembers](repeating: .none, count: batches.count)
    let wave = notifications?.judge(
      batches, plan: plan, delivered: delivered, throttled: throttled)
    return (throttled, wave, evaluated)
  }
}

/// What the pass before the ledgers keeps of each chunk it evaluates.
public enum LedgerPass: Sendable {
  /// Its pairs delivered before rule 8, for the ledgers.
  case deliveredPairs
  /// Those, all of them, kept with the chunk's counters for an evaluation
  /// that writes delivery lines or only counts: it then starts from what
  /// the pass found (`Evaluator.writeDelivered`) instead of deciding
  /// every pair again.
  case deliveries
  /// Those, and every pair's outcome (with the recipient's local hour, if
  /// asked): a work that compares outcomes (`fanout whatif`) then has
  /// rule 8's verdicts complete them (`Evaluator.applyThrottle`), and one
  /// that writes decision lines writes them from the outcomes
  /// (`Evaluator.writeDelivered`), instead of evaluating every pair again.
  case outcomes(localHours: Bool)
  /// Those, and every pair's outcome, delivery time and devices: `fanout
  /// audit` then has rule 8's verdicts complete the outcomes
  /// (`Evaluator.applyThrottle`) instead of evaluating every pair again.
  case audit

  /// Whether what the pass serves reads contract v3's notifications: an
  /// audit reads only which pairs are delivered, when and on which devices,
  /// which notifications never change.
  var readsNotifications: Bool {
    if case .audit = self { false } else { true }
  }
}

/// The pass before the ledgers: each chunk of a run evaluated without
/// rule 8, in parallel, keeping its pairs delivered before rule 8 (and,
/// with `LedgerPass.outcomes`, every pair's outcome).
public final class PassBeforeLedgers {
  private var finders: [Evaluator]
  private let gateways: Int
  /// Whether the results keep every pair's outcome (`LedgerPass.outcomes`).
  public let keepsOutcomes: Bool
  /// Whether the results are kept for the evaluation (`LedgerVerdicts.evaluated`).
  public let keepsResults: Bool

  /// - Parameter candidatesOnly: with `.deliveredPairs`, keep only the
  ///   pairs with trigger 'message' (rule 8's candidates: the throttle is
  ///   the only ledger).
  public init(index: Index, threads: Int, _ pass: LedgerPass, candidatesOnly: Bool = false) {
    gateways = index.gateways.count
    let output: Evaluator.Output
    switch pass {
    case .deliveredPairs:
      output = candidatesOnly ? .throttleCandidates : .deliveredPairs
      (keepsOutcomes, keepsResults) = (false, false)
    case .deliveries:
      output = .deliveredPairs
      (keepsOutcomes, keepsResults) = (false, true)
    case .outcomes:
      output = .outcomesAndDeliveredPairs
      (keepsOutcomes, keepsResults) = (true, true)
    case .audit:
      output = .auditAndDeliveredPairs
      (keepsOutcomes, keepsResults) = (true, true)
    }
    finders = (0..<max(1, threads)).map { _ in
      let finder = Evaluator(index: index, output: output)
      if case .outcomes(let localHours) = pass { finder.recordsLocalHours = localHours }
      return finder
    }
  }

  /// `run`, each chunk evaluated by `chunk`, given this pass's evaluator
  /// for its thread and one of `states` (as many as this pass has threads;
  /// any state serves any chunk): work that reads the pass's evaluation
  /// of a chunk is done beside it while the chunk's rows are in cache.
  public func run<State, Beside: Sendable>(
    _ batches: [MessageBatch], plan: [(batch: Int, messages: Range<Int>)],
    states: inout [State], empty: Beside,
    chunk: @Sendable (Evaluator, inout State, MessageBatch, Range<Int>) -> (ChunkResult, Beside)
  ) -> [(ChunkResult, Beside)] {
    precondition(states.count == finders.count, "one state per thread of the pass")
    // The states moved, not copied: a copy would share their buffers.
    var paired: [(finder: Evaluator, state: State)] = []
    for finder in finders.reversed() { paired.append((finder, states.removeLast())) }
    defer { while let (_, state) = paired.popLast() { states.append(state) } }
    return runChunks(
      count: plan.count, workers: &paired, empty: (ChunkResult(gateways: gateways), empty)
    ) { pair, k in
      chunk(pair.finder, &pair.state, batches[plan[k].batch], plan[k].messages)
    }
  }

  /// `plan`'s chunks of `batches`, evaluated without rule 8.
  public func run(_ batches: [MessageBatch], plan: [(batch: Int, messages: Range<Int>)])
    -> [ChunkResult]
  {
    let gateways = gateways
    return runChunks(count: plan.count, workers: &finders, empty: ChunkResult(gateways: gateways)) {
      finder, k in
      var result = ChunkResult(gateways: gateways)
      finder.evaluate(batches[plan[k].batch], messages: plan[k].messages, into: &result)
      return result
    }
  }
}

/// The throttles of several what-if sides that judge the same candidates —
/// each takes index 0's pass before the ledgers (a sweep of throttles) —
/// judged in one walk over one ledger (`ThrottleJudge` of them all), where
/// a ledger each held every counted time once per side (at 1M users, about
/// 450 MB each). Each side's `Ledgers` asks for its verdicts once per run
/// of batches, in any order; the first to ask walks for all of them.
public final class ThrottleGroup {
  private let judge: ThrottleJudge
  private var found: [[ThrottledMembers]] = []
  private var asked = 0

  /// A group judging `throttles` (2 to 16), in its sides' order, over the
  /// member slots of `index`, for `threads` workers.
  public init(index: Index, throttles: [AppSettings.Throttle], threads: Int) {
    judge = ThrottleJudge(
      index: index, throttles: throttles, threads: Ledgers.partitions(threads: max(1, threads)))
  }

  /// The verdicts of the side at `place` for this run (see `Ledgers.judge`).
  func verdicts(
    _ place: Int, _ batches: [MessageBatch], plan: [(batch: Int, messages: Range<Int>)],
    delivered: [DeliveredPairs]
  ) -> [ThrottledMembers] {
    if asked == 0 { found = judge.judgeEach(batches, plan: plan, delivered: delivered) }
    asked = (asked + 1) % judge.throttles.count
    return found[place]
  }
}
