/// FanoutAudit owns `fanout audit`: a delivery log (what a production
/// system actually sent) checked, push by push, against what the rules
/// deliver for the same traffic and snapshot. The kernel evaluates (as for
/// `eval`, through the engine); this module reads the logs, places each
/// push at its traffic line, matches and reports.
import FanoutEngine
import FanoutIndex
import FanoutKernel
import FanoutModel
import FanoutOutput
import FanoutPipeline
import FanoutReport
import FanoutSnapshot
import FanoutTime
import FanoutTraffic

/// What `fanout audit` is asked to do.
public struct AuditOptions: Sendable {
  public var snapshot: String
  public var messages: String
  /// The sent logs, in the order given.
  public var sent: [String]
  public var out: String
  /// How far from a pair's delivery time a push may leave and still be on time.
  public var toleranceMs: Int64 = AuditOptions.defaultToleranceMs
  public var threads = 1
  public var overwrite = false
  public var busyTimeoutMilliseconds = SnapshotLoader.defaultBusyTimeoutMilliseconds
  public var indexCache: IndexCache? = nil
  /// Kinds of finding that make the run exit 1.
  public var failOn: Set<FindingKind> = []

  /// One minute: pushes leave within seconds; a minute absorbs a queue.
  public static let defaultToleranceMs: Int64 = 60_000

  public init(snapshot: String, messages: String, sent: [String], out: String) {
    self.snapshot = snapshot
    self.messages = messages
    self.sent = sent
    self.out = out
  }
}

/// Why an audit stopped, with its exit code.
public enum AuditError: Error, CustomStringConvertible {
  /// As for `fanout eval`: usage, snapshot, traffic, output.
  case run(PipelineError)
  /// A sent log could not be read (66).
  case log(OutputError)
  /// A push behind the traffic line at hand: the logs are read again, sorted.
  case outOfOrder(file: Int, line: Int)

  public var description: String {
    switch self {
    case .run(let e): e.description
    case .log(let e): "cannot read the sent log: \(e.reason) ('\(e.path)')"
    case .outOfOrder(let file, let line):
      "sent log \(file + 1) is not in traffic order at line \(line)"
    }
  }

  public var exitStatus: ExitStatus {
    switch self {
    case .run(let e): e.exitStatus
    case .log: .noInput
    case .outOfOrder: .internalError
    }
  }
}

/// The chunk work of an audit: each pair's outcome, delivery time and
/// devices (`Evaluator.Output.audit`), with the messages they belong to.
struct AuditWork: ChunkWork {
  let index: Index

  struct Chunk: Sendable {
    var batch: MessageBatch
    var messages: Range<Int>
    var result: ChunkResult
  }

  var empty: Chunk {
    Chunk(batch: MessageBatch(), messages: 0..<0, result: ChunkResult(gateways: 0))
  }
  var indexes: [Index] { [index] }

  func makeWorker() -> Evaluator { Evaluator(index: index, output: .audit) }

  /// With ledgers, their pass records what the audit reads.
  func ledgerPass(side: Int) -> LedgerPass { .audit }

  func evaluate(
    _ batch: MessageBatch, messages: Range<Int>, verdicts: [LedgerVerdicts],
    worker: inout Evaluator
  ) -> Chunk {
    // A chunk the ledgers' pass evaluated needs only rule 8's verdicts.
    if var result = verdicts[0].evaluated[messages.lowerBound] {
      worker.applyThrottle(verdicts[0].throttled, batch, messages: messages, to: &result)
      return Chunk(batch: batch, messages: messages, result: result)
    }
    var result = ChunkResult(gateways: index.gateways.count)
    worker.evaluate(batch, messages: messages, verdicts: verdicts[0], into: &result)
    return Chunk(batch: batch, messages: messages, result: result)
  }
}

public enum Audit {
  /// Runs `fanout audit`: the traffic evaluated as `eval` does, each push of
  /// the logs matched with its pair and device; `findings.ndjson.lz4`,
  /// `rejected.ndjson`, `unreadable.ndjson` and `audit.json` in `out`, all
  /// or none.
  public static func run(_ options: AuditOptions) throws(AuditError) -> AuditReport {
    let clock = ContinuousClock()
    let started = clock.now
    guard options.messages != "-" else {
      throw .run(.usage("--messages: audit reads the traffic twice; give a file, not '-'"))
    }
    guard !options.sent.isEmpty else { throw .run(.usage("--sent: give at least one log")) }
    // One log given twice (however spelt) would report every push in it as
    // a duplicate.
    var seen: [(path: String, file: FileIdentity)] = []
    for path in options.sent {
      guard let file = FileIdentity(path: path) else { continue }  // unreadable: said later
      if let first = seen.first(where: { $0.file == file }) {
        throw .run(
          .usage("--sent: '\(path)' is the log '\(first.path)' again: give each log once"))
      }
      seen.append((path, file))
    }
    guard options.toleranceMs >= 0 else {
      throw .run(.usage("--tolerance-ms: must be 0 or more"))
    }
    let folder: OutputFolder
    do {
      folder = try OutputFolder(
        claiming: options.out, mode: .fresh(overwrite: options.overwrite),
        inputs: [.init("--snapshot", options.snapshot), .init("--messages", options.messages)]
          + options.sent.map { .init("--sent", $0) })
    } catch { throw .run(error) }
    defer { folder.release() }
    let index: Index
    do {
      index = try SnapshotLoader.load(
        path: options.snapshot, busyTimeoutMilliseconds: options.busyTimeoutMilliseconds,
        cache: options.indexCache
      ).index
    } catch { throw .run(.snapshot(error)) }
    let messages: MessageLines
    do {
      messages = try MessageLines(
        messages: options.messages, index: index, threads: options.threads)
    } catch { throw .run(.input(error)) }

    var report: AuditReport
    do {
      let logs = try SentLogs(
        paths: options.sent, messages: messages, index: index, threads: options.threads)
      report = try attempt(options, index: index, logs: logs)
    } catch .outOfOrder(let file, let line) {
      // Read again, whole and sorted; the first attempt's files are gone.
      let logs = try SentLogs(
        sortedFrom: options.sent, messages: messages, index: index, threads: options.threads)
      report = try attempt(
        options, index: index, logs: logs, sortedAt: "\(options.sent[file]):\(line)")
    }
    report.seconds = (clock.now - started).seconds
    return report
  }

  /// One pass over the traffic; `sortedAt` says where the logs were found
  /// out of order when they were sorted first.
  private static func attempt(
    _ options: AuditOptions, index: Index, logs: SentLogs, sortedAt: String? = nil
  ) throws(AuditError) -> AuditReport {
    func writing<T>(_ body: () throws(OutputError) -> T) throws(AuditError) -> T {
      do { return try body() } catch { throw .run(.output(error)) }
    }
    let findings = try writing { () throws(OutputError) in
      try LZ4FrameFile(directory: options.out, name: "findings.ndjson.lz4")
    }
    let rejected = try writing { () throws(OutputError) in
      try PendingFile(directory: options.out, name: "rejected.ndjson")
    }
    let reader: LineReader
    do { reader = try LineReader(path: options.messages) } catch { throw .run(.input(error)) }
    let explain =
      "fanout explain --snapshot \(ShellWord.quoted(options.snapshot)) --messages "
      + ShellWord.quoted(options.messages)
    let auditor = MessageAuditor(
      index: index, toleranceMs: options.toleranceMs, explainCommand: explain,
      logNames: options.sent, names: logs.names)
    var report = AuditReport(tally: auditor.tally)
    let engine = EvaluationEngine(
      index: index, threads: options.threads, work: AuditWork(index: index))
    // Matched with the log on a queue of its own while the workers evaluate
    // the next group of chunks.
    let matching = BackgroundQueue<Matching, AuditError>(
      Matching(auditor: auditor, logs: logs, findings: findings), label: "fanout.audit.match",
      inFlight: 2)
    try engine.run(
      reader, groupSize: Engine.chunksInFlight,
      readFailed: { AuditError.run(.input($0)) },
      deliver: { chunks throws(AuditError) in
        if matching.hasFailed { _ = try matching.finish() }  // (throws the failure)
        matching.submit { matching throws(AuditError) in try matching.match(chunks) }
      },
      waveDone: { batches throws(AuditError) in
        for batch in batches where !batch.rejections.isEmpty {
          report.rejected += batch.rejections.count
          try writing { () throws(OutputError) in
            try rejected.write(RejectedLines.json(batch.rejections))
          }
        }
      })
    var state = try matching.finish()
    report.messages = state.messages
    // In log order, however the files were read.
    for push in logs.unknown.sorted(by: { ($0.file, $0.logLine) < ($1.file, $1.logLine) }) {
      state.auditor.unknownMessage(push)
    }
    try state.flush(atLeast: 1)
    report.tally = state.auditor.tally
    report.reads = engine.reads
    report.logFiles = options.sent
    report.logLines = logs.logLines
    report.unreadable = logs.unreadable.count
    report.toleranceMs = options.toleranceMs
    report.sortedAt = sortedAt
    report.gatewayNames = (0..<index.gateways.count).map { index.gateways[$0] }
    var unreadable: [UInt8] = []
    for line in logs.unreadable {
      unreadable += #"{"file":"#.utf8
      unreadable += JSONText.quoted(logs.path(line.file))
      unreadable += #","line":\#(line.line),"error":"#.utf8
      unreadable += JSONText.quoted(line.reason)
      unreadable += "}\n".utf8
    }
    let final = report
    try writing { () throws(OutputError) in
      try findings.close()
      try rejected.sync()
      let unreadableFile = try PendingFile(directory: options.out, name: "unreadable.ndjson")
      try unreadableFile.write(unreadable)
      let html = try PendingFile(directory: options.out, name: "report.html")
      try html.write(final.html(snapshot: options.snapshot, traffic: options.messages))
      let json = try PendingFile(directory: options.out, name: "audit.json")
      try json.write(final.json())
      // All or none; audit.json last: its presence marks completion.
      try PendingFile.commit(together: [findings.file, rejected, unreadableFile, html, json])
    }
    return report
  }
}

/// The matching side of an audit: each chunk's messages, in traffic order,
/// with their pushes from the logs; finding lines compressed a block at a
/// time.
private struct Matching {
  var auditor: MessageAuditor
  let logs: SentLogs
  let findings: LZ4FrameFile
  var messages = 0
  private var pushes: [SentPush] = []

  init(auditor: MessageAuditor, logs: SentLogs, findings: LZ4FrameFile) {
    self.auditor = auditor
    self.logs = logs
    self.findings = findings
  }

  mutating func match(_ chunks: [AuditWork.Chunk]) throws(AuditError) {
    for chunk in chunks {
      var pairStart = 0
      for (k, m) in chunk.messages.enumerated() {
        let pairEnd = Int(chunk.result.messagePairEnds[k])
        pushes.removeAll(keepingCapacity: true)
        try logs.take(line: chunk.batch.lines[m], into: &pushes)
        auditor.audit(chunk.batch, m, chunk.result, pairs: pairStart..<pairEnd, pushes: &pushes)
        pairStart = pairEnd
      }
      messages += chunk.messages.count
    }
    try flush(atLeast: 1 << 20)
  }

  mutating func flush(atLeast: Int) throws(AuditError) {
    guard auditor.lines.count >= atLeast else { return }
    let blocks = LZ4Frame.blocks(auditor.lines)
    auditor.lines.removeAll(keepingCapacity: true)
    do { try findings.append(blocks: blocks) } catch { throw .run(.output(error)) }
  }
}
