import FanoutIndex
import FanoutKernel
import FanoutModel
import FanoutTraffic

/// What each evaluation chunk computes, and the state a worker thread keeps
/// for the whole run (evaluators, whose scratch space and channel shares
/// carry from chunk to chunk). A worker's state may speed a chunk up, never
/// change what it computes: outputs depend only on the chunk's messages.
public protocol ChunkWork: Sendable {
  associatedtype Worker
  associatedtype Output: Sendable

  /// The placeholder an output slot holds until its chunk is done.
  var empty: Output { get }
  /// The indexes the work evaluates against: one, or one per side of a
  /// comparison. Rule 8 is judged for each that sets a throttle.
  var indexes: [Index] { get }
  func makeWorker() -> Worker
  /// - Parameter verdicts: per index, what its ledgers found for the
  ///   batch: the members rule 8 throttles, contract v3's notifications.
  func evaluate(
    _ batch: MessageBatch, messages: Range<Int>, verdicts: [LedgerVerdicts],
    worker: inout Worker
  ) -> Output
  /// What the pass before the ledgers of index `side` keeps of each chunk
  /// for `evaluate` (`LedgerVerdicts.evaluated`).
  func ledgerPass(side: Int) -> LedgerPass
  /// Whether the ledgers of index `side` (> 0) take index 0's pass as
  /// theirs: rules 0–7 decide alike on both (`Index.decidesAlikeBeforeLedgers`)
  /// and both keep outcomes (`LedgerPass.outcomes`).
  func sharesFirstPass(side: Int) -> Bool
  /// Index 0's pass before the ledgers over one chunk, by `finder` (an
  /// evaluator of index 0 made for that pass), where index 0 has no
  /// ledgers of its own but other sides take its pass: with whatever else
  /// the work decides from that evaluation while the chunk's rows are in
  /// cache, handed back to `evaluate` in index 0's verdicts
  /// (`LedgerVerdicts.decidedBeside`; nothing when empty).
  func firstPass(
    _ batch: MessageBatch, messages: Range<Int>, finder: Evaluator, worker: inout Worker
  )
    -> (ChunkResult, beside: [ChunkResult])
}

extension ChunkWork {
  public func ledgerPass(side: Int) -> LedgerPass { .deliveredPairs }
  public func sharesFirstPass(side: Int) -> Bool { false }
  public func firstPass(
    _ batch: MessageBatch, messages: Range<Int>, finder: Evaluator, worker: inout Worker
  ) -> (ChunkResult, beside: [ChunkResult]) {
    var result = ChunkResult(gateways: indexes[0].gateways.count)
    finder.evaluate(batch, messages: messages, into: &result)
    return (result, [])
  }
}

/// The one evaluation loop of every command: parse → plan → chunks on the
/// worker pool → outputs in input order. `fanout eval` writes delivery
/// files from the outputs, `fanout whatif` compares two indexes, `fanout
/// stream` writes segments; each plugs in its `ChunkWork` and consumes the
/// ordered outputs.
///
/// Chunk boundaries depend only on the input (and the chunk size), never on
/// the number of threads, so the outputs, in order, are the same whatever
/// `threads` is.
public final class EvaluationEngine<Work: ChunkWork> {
  /// The index traffic is parsed against (channels, users and categories).
  public let index: Index
  public let work: Work
  /// Counting only (`--summary-only`): messages of large channels are
  /// counted through channel shares, and chunks are planned for it.
  public let sharedCounting: Bool
  private var workers: [Work.Worker]
  /// Rule 8 and contract v3, per index of the work that sets a throttle or
  /// turns notification groups on; the ledgers live as long as the engine.
  public private(set) var ledgers: [Ledgers?]
  /// The sides whose ledgers take index 0's pass as theirs
  /// (`ChunkWork.sharesFirstPass`), and index 0's pass when it has no
  /// ledgers of its own to run it.
  private let sidesSharingFirstPass: [Int]
  private let firstPass: PassBeforeLedgers?
  /// With ledgers, batches are judged and evaluated in runs of about this
  /// many chunks (`evaluate`).
  public var ledgerChunks = Engine.ledgerChunks
  /// Whether the update lines (contract v3) of the first index are kept
  /// for `takeUpdates` (else dropped).
  public var keepsUpdates = false
  /// The update lines of the lines evaluated since the last `takeUpdates`,
  /// in input order.
  private var updates: [UInt8] = []
  /// Whether `badges` are tallied (`whatif` compares them; a run's files
  /// carry each badge already).
  public var countsBadges = false
  /// Per index of the work that turns notification groups on, the badges
  /// of its delivered pairs so far (with `countsBadges`).
  public private(set) var badges: [BadgeHistogram?]
  /// Told each wave's notifications (contract v3) of the first index, with
  /// the wave's batches, before the wave is evaluated.
  public var onNotificationWave: (([MessageBatch], NotificationWave) -> Void)?
  /// Read lines evaluated (contract v3), whatever the settings.
  public private(set) var reads = 0
  /// Time spent parsing and evaluating, for the run's timings.
  public private(set) var parseTime = PhaseTime()
  public private(set) var evaluateTime = PhaseTime()
  /// The traffic lines read (blank and rejected ones too); with
  /// `digestsTraffic`, a digest of their bytes, by which `fanout merge`
  /// knows that shards ran on the same traffic.
  public var digestsTraffic = false
  public private(set) var linesRead = 0
  public private(set) var trafficDigest: UInt64 = 0

  /// - Parameter throttleRetention: how late a line may be, behind the
  ///   newest before it, for the throttle to count exactly (nil: any, all
  ///   counted deliveries are kept; see `ThrottleLedger`).
  public init(
    index: Index, threads: Int, work: Work, sharedCounting: Bool = false,
    throttleRetention: Int64? = nil
  ) {
    self.index = index
    self.work = work
    self.sharedCounting = sharedCounting
    let threads = max(1, threads)
    workers = (0..<threads).map { _ in work.makeWorker() }
    // Sides that take index 0's pass and set a throttle (a what-if sweep
    // of throttles) judge the same candidates: in one walk, over one
    // ledger (`ThrottleGroup`), each keeping its own verdicts.
    let throttlesSharing =
      throttleRetention == nil
      ? work.indexes.indices.dropFirst().filter {
        work.sharesFirstPass(side: $0) && work.indexes[$0].settings.throttle != nil
      } : []
    let group =
      (2...16).contains(throttlesSharing.count)
      ? ThrottleGroup(
        index: work.indexes[throttlesSharing[0]],
        throttles: throttlesSharing.map { work.indexes[$0].settings.throttle! }, threads: threads)
      : nil
    ledgers = work.indexes.enumerated().map { side, index in
      Ledgers(
        index: index, threads: threads, throttleRetention: throttleRetention,
        pass: work.ledgerPass(side: side),
        sharedThrottle: group.flatMap { group in
          throttlesSharing.firstIndex(of: side).map { (group, $0) }
        })
    }
    let ledgers = ledgers
    sidesSharingFirstPass = work.indexes.indices.dropFirst().filter {
      ledgers[$0] != nil && work.sharesFirstPass(side: $0)
    }
    firstPass =
      !sidesSharingFirstPass.isEmpty && ledgers[0] == nil
      ? PassBeforeLedgers(index: work.indexes[0], threads: threads, work.ledgerPass(side: 0))
      : nil
    // Counting only, no line carries a notification's fields.
    for ledger in ledgers { ledger?.notifications?.buildsFields = !sharedCounting }
    badges = ledgers.map { $0?.notifications == nil ? nil : BadgeHistogram() }
  }

  /// The update lines of the first index since the last call.
  public func takeUpdates() -> [UInt8] {
    defer { updates = [] }
    return updates
  }

  /// Notifications hidden, removed, cancelled and unread so far, per index
  /// (nil where notification groups are off).
  public var notificationCounters: [NotificationCounters?] {
    ledgers.map { $0?.notifications?.ledger.counters }
  }

  /// Carries the throttle ledgers and notification states of `previous`
  /// (an engine of the snapshot this one replaces) over, side by side; see
  /// `Ledgers.inherit`.
  public func inheritLedgers<Other>(from previous: EvaluationEngine<Other>) {
    for (ledger, old) in zip(ledgers, previous.ledgers) {
      if let ledger, let old { ledger.inherit(from: old) }
    }
  }

  public var threads: Int { workers.count }

  /// Reads the next wave of lines and parses it in fixed chunks of lines,
  /// in parallel; nil at the end. Reading counts as parse time.
  private func readAndParse(_ reader: LineReader) throws(TrafficInputError) -> [MessageBatch]? {
    let started = PhaseTime.start()
    defer { parseTime.add(since: started) }
    guard let block = try reader.next(maxLines: Engine.waveLines) else { return nil }
    if digestsTraffic { digest(block) }
    linesRead = block.firstLine + block.count - 1
    return Engine.parse(block, index: index, workers: threads)
  }

  /// Folds each line's bytes, seeded by its line number, into the digest.
  private func digest(_ block: LineBlock) {
    block.bytes.withUnsafeBytes { raw in
      for k in 0..<block.count {
        let line = UnsafeRawBufferPointer(rebasing: raw[block.starts[k]..<block.ends[k]])
        let h = XXH64.hash(line, seed: UInt64(block.firstLine + k))
        trafficDigest = (trafficDigest ^ h) &* 0x9E37_79B9_7F4A_7C15 &+ 1
      }
    }
  }

  /// Parses several blocks (each from its own producer), in parallel.
  public func parse(blocks: [LineBlock]) -> [[MessageBatch]] {
    let started = PhaseTime.start()
    defer { parseTime.add(since: started) }
    let index = index
    return runChunks(count: blocks.count, workers: threads, empty: [MessageBatch]()) {
      Engine.parse(blocks[$0], index: index, workers: 1)
    }
  }

  /// Evaluates `batches` in chunks of about `chunkPairs` pairs, `groupSize`
  /// chunks at a time, and hands each group's outputs, in order, to
  /// `deliver` (which may overlap with the next group's evaluation by
  /// handing the work on to another thread).
  ///
  /// With ledgers, the batches are judged and evaluated a run of whole
  /// batches at a time, of about `ledgerChunks` chunks: what the ledgers
  /// keep between their pass and the evaluation (every delivered pair,
  /// with its notification's fields) then grows with those chunks' pairs,
  /// not with a wave's lines — a wave of broadcast traffic holds billions
  /// of pairs. The ledgers walk lines in input order, so judging a wave in
  /// runs finds what judging it whole would.
  public func evaluate<E: Error>(
    _ batches: [MessageBatch], chunkPairs: Int = Engine.chunkPairs, groupSize: Int,
    _ deliver: ([Work.Output]) throws(E) -> Void
  ) throws(E) {
    let plan = Engine.planChunks(
      batches, index: index, chunkPairs: chunkPairs, sharedCounting: sharedCounting)
    // (Batches with no chunk — only read lines or rejected ones — are
    // judged whole, as without ledgers.)
    guard ledgers.contains(where: { $0 != nil }), !plan.isEmpty else {
      return try judgeAndEvaluate(batches, plan: plan, groupSize: groupSize, deliver)
    }
    var first = 0  // the run's first batch and chunk
    var firstChunk = 0
    for k in plan.indices {
      let runEnds =
        k == plan.count - 1
        || (plan[k + 1].batch != plan[k].batch && k + 1 - firstChunk >= ledgerChunks)
      guard runEnds else { continue }
      let end = k == plan.count - 1 ? batches.count : plan[k + 1].batch
      try judgeAndEvaluate(
        Array(batches[first..<end]),
        plan: plan[firstChunk...k].map { ($0.batch - first, $0.messages) }, groupSize: groupSize,
        deliver)
      (first, firstChunk) = (end, k + 1)
    }
  }

  /// Judges `batches` with the ledgers, then evaluates `plan`'s chunks of them.
  private func judgeAndEvaluate<E: Error>(
    _ batches: [MessageBatch], plan: [(batch: Int, messages: Range<Int>)], groupSize: Int,
    _ deliver: ([Work.Output]) throws(E) -> Void
  ) throws(E) {
    let work = work
    let size = max(1, groupSize)
    let judgingStarted = PhaseTime.start()
    // Index 0's pass, where other sides' ledgers take it as theirs (with
    // what the work decides beside it, when index 0 has no ledgers).
    var first: [ChunkResult]? = nil
    var decidedBeside: [[ChunkResult]] = []
    if !sidesSharingFirstPass.isEmpty, let firstPass {
      let made = firstPass.run(batches, plan: plan, states: &workers, empty: [ChunkResult]()) {
        finder, worker, batch, messages in
        work.firstPass(batch, messages: messages, finder: finder, worker: &worker)
      }
      (first, decidedBeside) = (made.map(\.0), made.map(\.1))
    } else if !sidesSharingFirstPass.isEmpty {
      first = ledgers[0]?.pass.run(batches, plan: plan)
    }
    // Per index, per batch.
    let judged = ledgers.enumerated().map { side, ledger in
      let shares = side == 0 || sidesSharingFirstPass.contains(side)
      let found = ledger?.judge(batches, plan: plan, evaluated: shares ? first : nil)
      let evaluated = found?.evaluated ?? (side == 0 ? first ?? [] : [])
      if let wave = found?.notifications {
        if side == 0 && keepsUpdates { updates += wave.updates }
        if side == 0 { onNotificationWave?(batches, wave) }
        if countsBadges {
          for fields in wave.fields { badges[side]?.add(fields) }
        }
      }
      var verdicts = batches.indices.map { b in
        LedgerVerdicts(
          throttled: found?.throttled[b] ?? .none, notifications: found?.notifications?.fields[b])
      }
      for (k, result) in evaluated.enumerated() {
        verdicts[plan[k].batch].evaluated[plan[k].messages.lowerBound] = result
      }
      if side == 0 {
        for (k, beside) in decidedBeside.enumerated() where !beside.isEmpty {
          verdicts[plan[k].batch].decidedBeside[plan[k].messages.lowerBound] = beside
        }
      }
      return verdicts
    }
    reads += batches.reduce(0) { $0 + $1.reads.count }
    let verdicts = batches.indices.map { b in judged.map { $0[b] } }
    evaluateTime.add(since: judgingStarted)
    for groupStart in stride(from: 0, to: plan.count, by: size) {
      let started = PhaseTime.start()
      let group = Array(plan[groupStart..<(groupStart + min(size, plan.count - groupStart))])
      let outputs = runChunks(count: group.count, workers: &workers, empty: work.empty) {
        worker, i in
        work.evaluate(
          batches[group[i].batch], messages: group[i].messages,
          verdicts: verdicts[group[i].batch], worker: &worker)
      }
      evaluateTime.add(since: started)
      try deliver(outputs)
    }
  }

  /// The whole input, wave by wave: each wave of lines is parsed, then
  /// evaluated (`deliver` per group of chunk outputs), then handed to
  /// `waveDone` with its batches (for their rejections, and progress).
  public func run<E: Error>(
    _ reader: LineReader, groupSize: Int, readFailed: (TrafficInputError) -> E,
    deliver: ([Work.Output]) throws(E) -> Void, waveDone: ([MessageBatch]) throws(E) -> Void
  ) throws(E) {
    while true {
      let batches: [MessageBatch]
      do {
        guard let next = try readAndParse(reader) else { return }
        batches = next
      } catch {
        throw readFailed(error)
      }
      try evaluate(batches, groupSize: groupSize, deliver)
      try waveDone(batches)
    }
  }
}
