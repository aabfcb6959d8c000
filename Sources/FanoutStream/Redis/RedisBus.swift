import Dispatch
import FanoutModel
import FanoutTime

/// One input entry of a message bus: its id, and its traffic line (nil when
/// the entry has no `message` field, or its data was deleted).
struct BusEntry {
  var id: [UInt8]
  var line: [UInt8]?
}

/// A message bus the stage consumes from and produces to (`BusSource`).
/// Redis Streams is the first; a Kafka or NATS adapter would sit beside it.
protocol MessageBus: AnyObject {
  /// Where it reads, for the log.
  var source: String { get }
  /// (Re)connects and sets up what the stage needs (the consumer group);
  /// called first and after a lost connection.
  func connect() throws(RedisError)
  /// Up to `max` entries: first those this consumer read earlier and did not
  /// acknowledge (after a crash or a lost connection), then entries other
  /// consumers left pending too long, then new ones, waiting at most `wait`.
  func read(max: Int, wait: Duration) throws(RedisError) -> [BusEntry]
  /// The commands that write the batch's deliveries, rejections and
  /// record and acknowledge its entries, all or nothing (made while the
  /// batch before it is still being written).
  func prepare(_ batch: EvaluatedBatch, entries: [BusEntry], lineEntries: [Int])
    throws(RedisError) -> PreparedCommit
  /// Starts applying `commit`; `awaitCommit` tells how it ended. One at a time.
  func send(_ commit: PreparedCommit) throws(RedisError)
  /// Waits for the batch sent last to be written (nothing if none is in
  /// flight); returns when its transaction was answered.
  @discardableResult
  func awaitCommit() throws(RedisError) -> ContinuousClock.Instant
  /// How many of `entries` are still this consumer's pending ones.
  func pendingShare(of entries: [BusEntry]) throws(RedisError) -> PendingShare
  /// (entries read but not acknowledged, entries not yet read) for the status line.
  func lag() -> (pending: Int64, behind: Int64?)?
}

/// How much of a batch a consumer still has pending.
enum PendingShare {
  case all, some, none
}

/// A batch's transaction, in the protocol, ready to send.
struct PreparedCommit {
  var commands: RESPCommands
  /// The batch's number, for errors.
  var batch: Int
}

/// What the Redis stage is asked to do (`fanout stream --redis`).
public struct RedisOptions: Sendable {
  public var address: RedisAddress
  public var password: String?
  public var stream: String
  public var group: String
  public var consumer: String
  public var outPrefix: String
  /// Create the group at the start of the stream rather than its end.
  public var fromStart = false
  /// Take over entries other consumers left pending this long.
  public var claimIdleMilliseconds: Int?
  /// Trim output streams to about this many entries.
  public var maxLength: Int?

  public init(
    address: RedisAddress, password: String?, stream: String, group: String, consumer: String,
    outPrefix: String
  ) {
    self.address = address
    self.password = password
    self.stream = stream
    self.group = group
    self.consumer = consumer
    self.outPrefix = outPrefix
  }
}

/// Redis Streams through a consumer group (docs/stream.md, "Redis"):
/// `XREADGROUP` in, and per batch one `MULTI`/`EXEC` holding an `XADD` per
/// delivery line, rejection and batch record, and the `XACK` of its entries.
///
/// Two connections: one reads (and checks keys), the other sends each
/// batch's transaction and reads its replies on a thread of its own, so
/// that the server applies a batch while the stage reads and evaluates the
/// next. (On one connection the server answers the read only after the
/// transaction sent before it.)
final class RedisBus: MessageBus {
  let options: RedisOptions
  private var connection: RedisConnection?
  private var writer: RedisConnection?
  /// The transaction in flight on `writer`, if any.
  private var transaction: Transaction?
  private let writing = DispatchQueue(label: "fanout.redis.writer")
  /// Whether this consumer's own pending entries are still to be re-read
  /// (at the start and after every lost connection).
  private var pendingFirst = true
  /// The group (or its stream) was deleted under the stage: it is created
  /// again from the stream's start, not its end.
  private var groupDeleted = false
  /// The last of this consumer's own pending entries re-read: each is
  /// returned once, though it stays pending until its batch is committed
  /// (a batch's window may read again before that).
  private var pendingCursor: [UInt8] = Array("0".utf8)
  private var claimCursor: [UInt8] = Array("0-0".utf8)
  /// Output streams whose key was found free or a stream on this connection.
  private var streamsChecked: Set<String> = []

  init(_ options: RedisOptions) { self.options = options }

  var source: String {
    "Redis stream '\(options.stream)' at \(options.address), group '\(options.group)', consumer '\(options.consumer)'"
  }

  private var streamKey: [UInt8] { Array(options.stream.utf8) }
  private var groupKey: [UInt8] { Array(options.group.utf8) }
  private var consumerKey: [UInt8] { Array(options.consumer.utf8) }

  func connect() throws(RedisError) {
    // The writer's thread is done with its connection before it is
    // replaced (the transaction's outcome is kept for `awaitCommit`).
    if let transaction {
      transaction.done.wait()
      transaction.done.signal()
    }
    connection = nil
    writer = nil
    let made = try RedisConnection(
      options.address, password: options.password, timeoutMilliseconds: 5_000)
    let created = try made.command([
      "XGROUP", "CREATE", options.stream, options.group,
      options.fromStart || groupDeleted ? "0" : "$", "MKSTREAM",
    ])
    if case .error(let message) = created, !message.hasPrefix("BUSYGROUP") {
      // The input key holds something else than a stream: nothing to read.
      throw message.hasPrefix("WRONGTYPE") ? .input(message) : .refusal(message)
    }
    // (After the group: a server at its memory limit refuses the group's
    // creation, not a connection, and its refusal is the batch's, exit 73.)
    writer = try RedisConnection(
      options.address, password: options.password, timeoutMilliseconds: 5_000)
    connection = made
    groupDeleted = false
    streamsChecked = []
    for name in ["rejected", "batches"] { try checkOutputStream(name) }
    pendingFirst = true
    pendingCursor = Array("0".utf8)
  }

  /// `PREFIX:name`, an output stream's key.
  private func outputKey(_ name: String) -> [UInt8] {
    Array((options.outPrefix + ":" + name).utf8)
  }

  /// An output key of another type would fail inside EXEC, after other
  /// commands of the batch (its XACK among them) applied: each output key
  /// is checked before its first use on a connection, and refused.
  private func checkOutputStream(_ name: String) throws(RedisError) {
    guard !streamsChecked.contains(name) else { return }
    let key = outputKey(name)
    if case .status(let type) = try check(live().command([Array("TYPE".utf8), key])),
      type != "none" && type != "stream"
    {
      throw .reply("'\(String(decoding: key, as: UTF8.self))' is a \(type), not a stream")
    }
    streamsChecked.insert(name)
  }

  private func live() throws(RedisError) -> RedisConnection {
    guard let connection else { throw .connection("not connected to Redis") }
    return connection
  }

  func read(max: Int, wait: Duration) throws(RedisError) -> [BusEntry] {
    do { return try readOrRefuse(max: max, wait: wait) } catch {
      guard case .reply(let message) = error else { throw error }
      // The stream (and its group with it) or the group deleted while the
      // stage ran: nothing of it can be recovered; the group is created
      // again, from the start of whatever the stream holds by then.
      if message.hasPrefix("NOGROUP") || message.hasPrefix("UNBLOCKED") {
        groupDeleted = true
        throw .connection("the input stream or its group was deleted (\(message))")
      }
      throw .input(message)
    }
  }

  private func readOrRefuse(max: Int, wait: Duration) throws(RedisError) -> [BusEntry] {
    let redis = try live()
    let count = Array("\(max)".utf8)
    if pendingFirst {
      let own = try entries(
        check(
          redis.command([
            Array("XREADGROUP".utf8), Array("GROUP".utf8), groupKey, consumerKey,
            Array("COUNT".utf8), count, Array("STREAMS".utf8), streamKey, pendingCursor,
          ])))
      if let last = own.last {
        pendingCursor = last.id
        return own
      }
      pendingFirst = false
    }
    if let idle = options.claimIdleMilliseconds {
      let claimed = try check(
        redis.command([
          Array("XAUTOCLAIM".utf8), streamKey, groupKey, consumerKey, Array("\(idle)".utf8),
          claimCursor, Array("COUNT".utf8), count,
        ]))
      if let parts = claimed.array, parts.count >= 2 {
        claimCursor = parts[0].bytes ?? Array("0-0".utf8)
        let taken = entryList(parts[1])
        if !taken.isEmpty { return taken }
      }
    }
    let milliseconds = Swift.max(
      1, Int(wait.components.seconds * 1000 + wait.components.attoseconds / 1_000_000_000_000_000))
    redis.setTimeout(milliseconds: milliseconds + 5_000)
    defer { redis.setTimeout(milliseconds: 5_000) }
    return try entries(
      check(
        redis.command([
          Array("XREADGROUP".utf8), Array("GROUP".utf8), groupKey, consumerKey, Array("COUNT".utf8),
          count, Array("BLOCK".utf8), Array("\(milliseconds)".utf8), Array("STREAMS".utf8),
          streamKey, Array(">".utf8),
        ])))
  }

  /// The entries of an XREADGROUP reply (nil: none).
  private func entries(_ reply: RedisReply) -> [BusEntry] {
    guard let streams = reply.array, let first = streams.first?.array, first.count == 2 else {
      return []
    }
    return entryList(first[1])
  }

  /// `[[id, [field, value, …]], …]`; a deleted entry has no field list.
  private func entryList(_ reply: RedisReply) -> [BusEntry] {
    (reply.array ?? []).compactMap { entry in
      guard let parts = entry.array, let id = parts.first?.bytes else { return nil }
      var line: [UInt8]?
      if parts.count > 1, let fields = parts[1].array {
        var i = 0
        while i + 1 < fields.count {
          if fields[i].bytes == Self.messageField { line = fields[i + 1].bytes }
          i += 2
        }
      }
      return BusEntry(id: id, line: line)
    }
  }

  static let messageField = Array("message".utf8)

  func prepare(_ batch: EvaluatedBatch, entries: [BusEntry], lineEntries: [Int])
    throws(RedisError) -> PreparedCommit
  {
    for (g, lines) in batch.deliveries.enumerated() where !lines.isEmpty {
      try checkOutputStream(batch.snapshot.index.gateways[g])
    }
    if !batch.updates.isEmpty { try checkOutputStream("updates") }
    let maxLength = options.maxLength.map { Array(String($0).utf8) }
    var commands = RESPCommands()
    /// `XADD key [MAXLEN ~ N] * field value field value`, the first value
    /// given by `firstValue`.
    func xadd(
      _ key: [UInt8], _ field: StaticString, _ firstValue: (inout RESPCommands) -> Void,
      _ otherField: StaticString? = nil, _ otherValue: [UInt8] = []
    ) {
      commands.command(arguments: 5 + (maxLength == nil ? 0 : 3) + (otherField == nil ? 0 : 2))
      commands.argument("XADD")
      commands.argument(key)
      if let maxLength {
        commands.argument("MAXLEN")
        commands.argument("~")
        commands.argument(maxLength)
      }
      commands.argument("*")
      commands.argument(field)
      firstValue(&commands)
      if let otherField {
        commands.argument(otherField)
        commands.argument(otherValue)
      }
    }
    commands.command(arguments: 1)
    commands.argument("MULTI")
    for (g, lines) in batch.deliveries.enumerated() where !lines.isEmpty {
      let key = outputKey(batch.snapshot.index.gateways[g])
      lines.forEachLine { line in
        let (number, rest) = Self.splitLineNumber(lines[line])
        // The line without its number: `{` and the rest.
        xadd(
          key, "line", { $0.argument(UInt8(ascii: "{"), rest) }, "entry",
          entries[lineEntries[number - 1]].id)
      }
    }
    let rejected = outputKey("rejected")
    for rejection in batch.rejections {
      xadd(
        rejected, "entry", { $0.argument(entries[lineEntries[rejection.line - 1]].id) }, "error",
        Array(rejection.reason.utf8))
    }
    // Contract v3: each update line with the entry of its read line.
    batch.updates.forEachLine { range in
      let line = batch.updates[range]
      let (number, _) = Self.splitLineNumber(line)
      xadd(
        outputKey("updates"), "update", { $0.argument(line) }, "entry",
        entries[lineEntries[number - 1]].id)
    }
    for entry in entries where entry.line == nil {
      xadd(rejected, "entry", { $0.argument(entry.id) }, "error", Array("no 'message' field".utf8))
    }
    let record = batch.record(closedAtMillis: WallClock.nowMillis())
    xadd(outputKey("batches"), "batch", { $0.argument(record) })
    commands.command(arguments: 3 + entries.count)
    commands.argument("XACK")
    commands.argument(streamKey)
    commands.argument(groupKey)
    for entry in entries { commands.argument(entry.id) }
    commands.command(arguments: 1)
    commands.argument("EXEC")
    return PreparedCommit(commands: commands, batch: batch.number)
  }

  func send(_ commit: PreparedCommit) throws(RedisError) {
    precondition(transaction == nil, "a batch is already being written")
    guard let writer else { throw .connection("not connected to Redis") }
    let sent = Transaction(commit.commands, batch: commit.batch, on: writer)
    transaction = sent
    writing.async { sent.run() }
  }

  func pendingShare(of entries: [BusEntry]) throws(RedisError) -> PendingShare {
    let redis = try live()
    let wanted = Set(entries.map(\.id))
    // This consumer's pending entries, a page at a time (`(` excludes the
    // page's last id); asked only after a lost connection.
    var found = 0
    var start = Array("-".utf8)
    let page = 1_000
    while true {
      let reply = try check(
        redis.command([
          Array("XPENDING".utf8), streamKey, groupKey, start, Array("+".utf8),
          Array("\(page)".utf8), consumerKey,
        ]))
      let rows = reply.array ?? []
      for row in rows {
        if let id = row.array?.first?.bytes, wanted.contains(id) { found += 1 }
      }
      guard rows.count == page, let lastID = rows.last?.array?.first?.bytes else { break }
      start = Array("(".utf8) + lastID
    }
    return found == wanted.count ? .all : found == 0 ? .none : .some
  }

  @discardableResult
  func awaitCommit() throws(RedisError) -> ContinuousClock.Instant {
    guard let transaction else { return .now }
    self.transaction = nil
    transaction.done.wait()
    if let error = transaction.error { throw error }
    return transaction.answered
  }

  /// One batch's transaction, sent and answered on the writer's thread.
  private final class Transaction: @unchecked Sendable {
    let done = DispatchSemaphore(value: 0)
    /// Set before `done` is signalled.
    private(set) var error: RedisError?
    private(set) var answered = ContinuousClock.now
    private let commands: RESPCommands
    private let batch: Int
    private let redis: RedisConnection

    init(_ commands: RESPCommands, batch: Int, on redis: RedisConnection) {
      self.commands = commands
      self.batch = batch
      self.redis = redis
    }

    func run() {
      defer {
        answered = .now
        done.signal()
      }
      do throws(RedisError) { try apply() } catch { self.error = error }
    }

    private func apply() throws(RedisError) {
      try redis.append(commands)
      // MULTI's OK, a QUEUED (or an error) per command, then EXEC's results.
      var refused: String?
      for _ in 0..<(commands.count - 1) {
        let error = try redis.replyError()
        refused = refused ?? error
      }
      let failed = try redis.replyError()
      if let refused = refused ?? failed {
        // A transient refusal (EXEC aborted: nothing applied) is retried.
        switch RedisError.refusal(refused) {
        case .connection(let reason):
          throw .connection("batch \(batch) not written: \(reason)")
        default: throw .reply("batch \(batch) not written: \(refused)")
        }
      }
    }
  }

  /// `{"line":N,rest` → (N, `rest`).
  static func splitLineNumber(_ line: ArraySlice<UInt8>) -> (Int, ArraySlice<UInt8>) {
    var i = line.startIndex + #"{"line":"#.utf8.count
    var number = 0
    while line[i] != UInt8(ascii: ",") {
      number = number * 10 + Int(line[i] - UInt8(ascii: "0"))
      i += 1
    }
    return (number, line[(i + 1)...])
  }

  func lag() -> (pending: Int64, behind: Int64?)? {
    guard let redis = connection,
      let groups = try? check(redis.command(["XINFO", "GROUPS", options.stream])).array
    else { return nil }
    for group in groups {
      guard let fields = group.array else { continue }
      var values: [String: RedisReply] = [:]
      var i = 0
      while i + 1 < fields.count {
        if let name = fields[i].bytes {
          values[String(decoding: name, as: UTF8.self)] = fields[i + 1]
        }
        i += 2
      }
      guard values["name"]?.bytes == groupKey else { continue }
      return (values["pending"]?.integer ?? 0, values["lag"]?.integer)
    }
    return nil
  }
}
