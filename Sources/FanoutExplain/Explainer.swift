import FanoutEngine
import FanoutIndex
import FanoutKernel
import FanoutModel
import FanoutSnapshot
import FanoutTime
import FanoutTraffic
import FoundationEssentials

/// Why `fanout explain` could not explain.
public enum ExplainError: Error, CustomStringConvertible {
  case snapshot(SnapshotError)
  case messages(TrafficInputError)
  case rejected(Rejection)
  case unknownUser(String)
  case unknownChannel(String)
  case noSuchMessage(id: String, path: String)
  /// The narration and the kernel's verdict disagree: a bug in Fanout.
  case disagreement(String)

  /// The exit code: 65 snapshot refused or message rejected, 66 messages
  /// unreadable or without that id, 64 a user or channel that does not exist.
  public var exitStatus: ExitStatus {
    switch self {
    case .snapshot(let e): e.exitStatus
    case .rejected: .dataError
    case .messages, .noSuchMessage: .noInput
    case .unknownUser, .unknownChannel: .usage
    case .disagreement: .internalError
    }
  }

  public var description: String {
    switch self {
    case .snapshot(let e): e.description
    case .messages(let e): e.description
    case .rejected(let r): "message rejected (line \(r.line)): \(r.reason)"
    case .unknownUser(let u): "unknown user \(Bounded.quoted(u))"
    case .unknownChannel(let c): "unknown channel \(Bounded.quoted(c))"
    case .noSuchMessage(let id, let path): "no message with id '\(id)' in '\(path)'"
    case .disagreement(let what):
      "internal error, please report it: the explanation and the evaluation disagree (\(what))"
    }
  }
}

/// Explains pairs against one snapshot. Loading validates the snapshot as
/// `fanout eval` does, so a refused snapshot is refused here too.
public final class Explainer {
  public let index: Index
  /// Runs the kernel's rule chain on the pairs explained.
  private let inspector: Evaluator
  private let records: SnapshotRecords
  private var users: [String: UserRecords?] = [:]
  private var categories: [String: CategoryRecord?] = [:]

  /// - Parameter user: the user the pairs will be explained for, if known:
  ///   their rows are read while the index loads.
  public init(snapshot path: String, cache: IndexCache? = nil, user: String? = nil)
    throws(ExplainError)
  {
    do {
      let reading = user.map { SnapshotRecords.reading(path, user: $0) }
      // A refused snapshot is refused first, as eval would refuse it.
      index = try SnapshotLoader.load(path: path, cache: cache).index
      if let reading, let user {
        let (store, found) = try reading.wait(index: index)
        records = store
        users[user] = .some(found)
      } else {
        records = try SnapshotRecords(path: path)
      }
    } catch {
      throw .snapshot(error)
    }
    inspector = Evaluator(index: index, output: .outcomes)
  }

  /// Explains message line `text` (numbered `line`) for `user`; `history`
  /// holds the earlier lines' deliveries for rule 8 (none by default).
  public func explain(
    line text: String, number line: Int = 1, user: String,
    history: ThrottleHistory = ThrottleHistory(replayed: false)
  ) throws(ExplainError) -> Explanation {
    let batch = try parseOne(text, number: line)
    return try explain(batch, 0, text: text, user: user, history: history)
  }

  /// Message line `text` (numbered `line`) as a batch of one message.
  func parseOne(_ text: String, number line: Int) throws(ExplainError) -> MessageBatch {
    var parser = TrafficParser(index: index)
    let bytes = Array(text.utf8)
    bytes.withUnsafeBytes { parser.parse($0, line: line) }
    let batch = parser.finish()
    if let rejection = batch.rejections.first { throw .rejected(rejection) }
    guard batch.count == 1 else {
      throw .rejected(
        Rejection(line: line, reason: batch.reads.count == 1 ? "a read line" : "blank line"))
    }
    return batch
  }

  /// Explains the first message with id `id` in the traffic file `path`
  /// (read lines, which may share it, are passed over).
  /// With a throttle set, the earlier lines of its channel are explained
  /// first, in order, for rule 8.
  public func explain(messagesAt path: String, id: String, user: String) throws(ExplainError)
    -> Explanation
  {
    let reader: LineReader
    do { reader = try LineReader(path: path) } catch { throw .messages(error) }
    let decoder = JSONDecoder()
    var history = ThrottleHistory()
    var earlier: [(text: String, line: Int, channel: String?)] = []
    while let block = try nextBlock(reader) {
      for k in 0..<block.count {
        let bytes = Array(block.bytes[block.starts[k]..<block.ends[k]])
        let text = String(decoding: bytes, as: UTF8.self)
        guard let fields = try? decoder.decode(TextFields.self, from: Data(bytes)) else { continue }
        guard fields.id == id else {
          if index.settings.throttle != nil {
            earlier.append((text, block.firstLine + k, fields.channel))
          }
          continue
        }
        // A read line forms no pair: never the message asked for, even with its id.
        if (try? decoder.decode(EventField.self, from: Data(bytes)))?.event == "read" { continue }
        // Rule 8: the earlier lines of this channel, as eval saw them.
        for line in earlier where line.channel == fields.channel {
          guard
            let e = try? explain(line: line.text, number: line.line, user: user, history: history)
          else { continue }  // rejected by eval too
          if e.pair == .evaluated { history.record(e) }
        }
        var explanation = try explain(
          line: text, number: block.firstLine + k, user: user, history: history)
        if index.settings.notificationGroups != nil, explanation.outcome?.isDelivered == true,
          let u = index.users.find(user)
        {
          explanation.notification = try notification(
            in: path, line: block.firstLine + k, user: u)
        }
        return explanation
      }
    }
    throw .noSuchMessage(id: id, path: path)
  }

  /// Contract v3: the notification of user row `u`'s pair on the message at
  /// `line` of the traffic file `path`, as the engine's input-order pass
  /// numbers it over the whole file, and the later read line that removed
  /// it, if any.
  private func notification(in path: String, line: Int, user u: Int32) throws(ExplainError)
    -> Explanation.Notification?
  {
    let reader: LineReader
    do { reader = try LineReader(path: path) } catch { throw .messages(error) }
    let engine = EvaluationEngine(index: index, threads: 1, work: NoOutput(index: index))
    engine.ledgers[0]?.notifications?.recordsRemovals = true
    var found: Explanation.Notification?
    engine.onNotificationWave = { batches, wave in
      for (b, batch) in batches.enumerated() where found == nil {
        guard let m = batch.lines.firstIndex(of: line) else { continue }
        let fields = wave.fields[b]
        if let k = fields.pair(of: m, user: u) {
          found = Explanation.Notification(
            group: fields.notes[k].group, id: fields.notes[k].id, badge: fields.notes[k].badge,
            hid: Array(fields.hidden(by: k)))
        }
      }
      guard let id = found?.id, found?.removedBy == nil else { return }
      if let read = wave.removals.first(where: { $0.user == u && $0.removed.contains(id) }) {
        let readID = (try? JSONDecoder().decode(String.self, from: Data(read.idJSON))) ?? ""
        found?.removedBy = (read.line, readID, read.ts, read.cancelled.contains(id))
      }
    }
    do throws(TrafficInputError) {
      try engine.run(
        reader, groupSize: .max, readFailed: { $0 },
        deliver: { (_: [Int]) throws(TrafficInputError) in },
        waveDone: { (_: [MessageBatch]) throws(TrafficInputError) in })
    } catch {
      throw .messages(error)
    }
    return found
  }

  /// The engine's work when only the ledgers' passes are wanted.
  private struct NoOutput: ChunkWork {
    let index: Index
    var empty: Int { 0 }
    var indexes: [Index] { [index] }
    func makeWorker() {}
    func evaluate(
      _ batch: MessageBatch, messages: Range<Int>, verdicts: [LedgerVerdicts], worker: inout Void
    ) -> Int { 0 }
  }

  private func nextBlock(_ reader: LineReader) throws(ExplainError) -> LineBlock? {
    do { return try reader.next(maxLines: 4096) } catch { throw .messages(error) }
  }

  /// A line's `event`, apart: a line whose `event` is no string is then
  /// still found by its id, and explained as rejected.
  private struct EventField: Decodable {
    var event: String?
  }

  /// The message's string fields as written (the batch holds rows and JSON literals).
  private struct TextFields: Decodable {
    var id: String
    var channel: String?
    var sender: String?
    var category: String?
    var thread: String?
  }

  /// Explains message `m` of `batch` (its line is `text`) for `user`.
  package func explain(
    _ batch: MessageBatch, _ m: Int, text: String, user: String,
    history: ThrottleHistory = ThrottleHistory(replayed: false)
  ) throws(ExplainError) -> Explanation {
    try explain(batch, m, message: describe(batch, m, text: text), user: user, history: history)
  }

  /// Message `m` of `batch` (its line is `text`), as explanations show it.
  func describe(_ batch: MessageBatch, _ m: Int, text: String) -> Explanation.Message {
    let fields = try? JSONDecoder().decode(TextFields.self, from: Data(text.utf8))
    let channelRow = Int(batch.channel[m])
    return Explanation.Message(
      id: fields?.id ?? "", line: batch.lines[m], channel: index.channels[channelRow],
      scope: index.channelScope[channelRow], kind: batch.kind[m], ts: batch.ts[m],
      force: batch.force[m], silent: batch.silent[m], sender: fields?.sender,
      category: fields?.category, thread: batch.hasThread[m] ? fields?.thread : nil)
  }

  package func explain(
    _ batch: MessageBatch, _ m: Int, message: Explanation.Message, user: String,
    history: ThrottleHistory
  ) throws(ExplainError) -> Explanation {
    guard let u = index.users.find(user), let records = try userRecords(user) else {
      throw .unknownUser(user)
    }
    let channelSettings = records.channelSettings(message.channel)
    let scopeSettings = records.scopes[Int(message.scope.rawValue)]
    let members = index.channelSize(Int(batch.channel[m]))
    let settings = EffectiveSettings(
      thread: message.thread.map { records.threadLevel(channel: message.channel, thread: $0) },
      channel: channelSettings, scope: scopeSettings, user: records.user, app: index.settings,
      traits: ChannelTraits(scope: message.scope, members: members),
      levels: [.channel, .scope, .user])

    // The kernel decides; the rows say where each value came from.
    let counted = index.settings.throttle.map {
      history.counted(at: message.ts, window: $0.windowMilliseconds)
    }
    var throttleCounted = false
    if let throttle = index.settings.throttle, let counted {
      throttleCounted = Evaluator.reachesLimit(Int64(counted.count), throttle)
    }
    let inspection = inspector.inspect(batch, m, user: u, throttleCounted: throttleCounted)

    var snoozeWindows: [Explanation.SnoozeWindow] = []
    for (source, level) in [
      (SettingSource.user, records.user), (.scope, scopeSettings), (.channel, channelSettings),
    ] {
      guard let level, let until = level.snoozeUntil else { continue }
      snoozeWindows.append(
        .init(
          source: source, start: level.snoozeStart, until: until,
          containsTS: level.snoozes(at: message.ts)))
    }
    let zone = index.zone(ofUser: Int(u))
    let dnd = Self.dnd(
      records, zone: zone, ts: message.ts,
      local: (inspection.localWeekday, inspection.localMinute), holds: inspection.inDND)
    let mention = Explanation.Mention(
      listed: batch.mentions(of: m).contains(u), mentionAll: batch.mentionAll[m],
      repliedTo: batch.replyTo[m] == u, notificationsOn: settings.mentionNotifications.value,
      channelMembers: members, mentionAllMaxMembers: index.settings.mentionAllMaxMembers,
      mentionAllNotificationsOn: settings.mentionAllNotifications.value,
      mentionAllApplies: inspection.mentionAllApplies,
      mentionAllCounts: inspection.mentionAllCounts, mentioned: inspection.mentioned)

    let category: CategoryRecord?
    if let name = message.category { category = try categoryRecord(name) } else { category = nil }
    var devices: [Explanation.Device] = []
    for (record, gate) in zip(records.devices, inspection.devices) {
      devices.append(
        .init(
          record: record, passes: gate.verdict.passes,
          why: Words.gate(gate.verdict, gateway: record.gateway, category: category?.name)))
    }
    if inspection.pair == PairInspection.Pair.evaluated
      && devices.count != inspection.devices.count
    {
      throw .disagreement("\(devices.count) device rows, \(inspection.devices.count) indexed")
    }

    let quiet: (QuietAction, SettingSource) =
      if let own = records.quietAction {
        (own, .user)
      } else if let app = index.settings.defaultQuietAction {
        (app, .settings)
      } else {
        (.drop, .builtIn)
      }
    var deferral = Explanation.Deferral(
      quietAction: quiet.0, source: quiet.1, instant: inspection.deferralInstant,
      localClock: nil, steps: Words.steps(inspection.deferralSteps))
    deferral.localClock = deferral.instant.map { Self.clock(records, zone: zone, ts: $0) }
    let presence = Explanation.Presence(
      action: index.settings.presenceAction ?? .ignore,
      delayMilliseconds: index.settings.presenceDelay,
      windows: records.presence,
      matched: inspection.inPresenceWindow
        ? records.presence.first { $0.from <= message.ts && message.ts < $0.until } : nil)

    var explanation = Explanation(
      message: message, user: user, pair: .evaluated, settings: settings,
      mutedSender: inspection.mutedSender, snoozeWindows: snoozeWindows, dnd: dnd,
      mention: mention,
      levelRule: Words.levelRule(
        message.kind, settings, reason: inspection.levelReason, trigger: inspection.trigger),
      levelReason: inspection.levelReason, trigger: inspection.trigger, devices: devices,
      deferral: deferral, presence: presence, outcome: nil, decidedBy: nil)
    explanation.snoozed = inspection.snoozed
    explanation.inDND = inspection.inDND
    explanation.quiet = inspection.quiet
    explanation.active = inspection.active
    if let throttle = index.settings.throttle, let counted {
      explanation.throttle = Explanation.Throttle(
        messages: throttle.messages, windowMilliseconds: throttle.windowMilliseconds,
        replayed: history.replayed, counted: counted,
        holds: throttleCounted && inspection.trigger == .message)
    }
    switch inspection.pair {
    case .notMember: explanation.pair = .notMember
    case .sender: explanation.pair = .sender
    case .evaluated:
      explanation.outcome =
        inspection.reason.map(Outcome.suppressed) ?? .delivered(inspection.trigger)
      explanation.decidedBy = inspection.decidedBy
      explanation.deliverAt = inspection.deliverAt
    }
    return explanation
  }

  /// The user's wall clock at `ts`.
  static func clock(_ records: UserRecords, zone: ZoneTable, ts: Int64) -> Explanation.LocalClock {
    let offset = zone.offsetSeconds(atMillis: ts)
    let minuteOfWeek = LocalTime.minuteOfWeek(utcMillis: ts, offsetSeconds: offset)
    let date = LocalTime.civilFromDays(
      LocalTime.floorDiv(ts &+ Int64(offset) &* 1000, 86_400_000))  // wraps as the kernel's clock
    return Explanation.LocalClock(
      timeZone: records.timeZone, offsetSeconds: offset, year: date.year, month: date.month,
      day: date.day, weekday: minuteOfWeek / 1440 + 1, minute: minuteOfWeek % 1440)
  }

  /// Rule 3 in words: the wall clock, the user's schedule, and — when the
  /// kernel found ts in DND (`holds`) — the window that holds the kernel's
  /// local (weekday, minute).
  static func dnd(
    _ records: UserRecords, zone: ZoneTable, ts: Int64, local: (weekday: Int, minute: Int),
    holds: Bool
  ) -> Explanation.DND {
    let clock = clock(records, zone: zone, ts: ts)
    // An end of 1439 (23:59) runs to midnight.
    func end(_ e: Int) -> Int { e == 1439 ? 1440 : e }
    if !records.weeklyDND.isEmpty {
      let hit = records.weeklyDND.first {
        $0.weekday == local.weekday && $0.start <= local.minute && local.minute < end($0.end)
      }
      return .init(
        clock: clock, schedule: .weekly(records.weeklyDND, replacedDaily: records.dailyDND),
        matched: holds ? hit.map { ($0.weekday, $0.start, $0.end) } : nil)
    }
    guard let daily = records.dailyDND else { return .init(clock: clock, schedule: .none) }
    return .init(
      clock: clock, schedule: .daily(daily),
      matched: holds ? (nil, daily.start, daily.end) : nil)
  }

  private func userRecords(_ id: String) throws(ExplainError) -> UserRecords? {
    try Self.cached(id, in: &users) { (id) throws(SnapshotError) in
      try records.user(id, in: index)
    }
  }

  private func categoryRecord(_ name: String) throws(ExplainError) -> CategoryRecord? {
    try Self.cached(name, in: &categories) { (n) throws(SnapshotError) in try records.category(n) }
  }

  /// `read(key)`, read once per key (a missing row is remembered too).
  private static func cached<V>(
    _ key: String, in cache: inout [String: V?], _ read: (String) throws(SnapshotError) -> V?
  ) throws(ExplainError) -> V? {
    if let hit = cache[key] { return hit }
    let found: V?
    do { found = try read(key) } catch { throw .snapshot(error) }
    cache[key] = found
    return found
  }
}
