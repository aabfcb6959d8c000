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
  private let records: SnapshotRecords
  private var users: [String: UserRecords?] = [:]
  private var categories: [String: CategoryRecord?] = [:]

  public init(snapshot path: String, cache: IndexCache? = nil) throws(ExplainError) {
    do {
      index = try SnapshotLoader.load(path: path, cache: cache).index
      records = try SnapshotRecords(path: path)
    } catch {
      throw .snapshot(error)
    }
  }

  /// Explains message line `text` (numbered `line`) for `user`; `history`
  /// holds the earlier lines' deliveries for rule 8 (none by default).
  public func explain(
    line text: String, number line: Int = 1, user: String,
    history: ThrottleHistory = ThrottleHistory(replayed: false)
  ) throws(ExplainError) -> Explanation {
    var parser = TrafficParser(index: index)
    let bytes = Array(text.utf8)
    bytes.withUnsafeBytes { parser.parse($0, line: line) }
    let batch = parser.finish()
    if let rejection = batch.rejections.first { throw .rejected(rejection) }
    guard batch.count == 1 else { throw .rejected(Rejection(line: line, reason: "blank line")) }
    return try explain(batch, 0, text: text, user: user, history: history)
  }

  /// Explains the first message with id `id` in the traffic file `path`.
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
        // Rule 8: the earlier lines of this channel, as eval saw them.
        for line in earlier where line.channel == fields.channel {
          guard
            let e = try? explain(line: line.text, number: line.line, user: user, history: history)
          else { continue }  // rejected by eval too
          if e.pair == .evaluated { history.record(e) }
        }
        return try explain(line: text, number: block.firstLine + k, user: user, history: history)
      }
    }
    throw .noSuchMessage(id: id, path: path)
  }

  private func nextBlock(_ reader: LineReader) throws(ExplainError) -> LineBlock? {
    do { return try reader.next(maxLines: 4096) } catch { throw .messages(error) }
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
    let fields = try? JSONDecoder().decode(TextFields.self, from: Data(text.utf8))
    let channelRow = Int(batch.channel[m])
    let message = Explanation.Message(
      id: fields?.id ?? "", line: batch.lines[m], channel: index.channels[channelRow],
      scope: index.channelScope[channelRow], kind: batch.kind[m], ts: batch.ts[m],
      force: batch.force[m], silent: batch.silent[m], sender: fields?.sender,
      category: fields?.category, thread: batch.hasThread[m] ? fields?.thread : nil)
    return try explain(batch, m, message: message, user: user, history: history)
  }

  package func explain(
    _ batch: MessageBatch, _ m: Int, message: Explanation.Message, user: String,
    history: ThrottleHistory
  ) throws(ExplainError) -> Explanation {
    guard let u = index.users.find(user), let records = try userRecords(user) else {
      throw .unknownUser(user)
    }
    let channelRow = Int(batch.channel[m])
    let channelSettings = records.channelSettings(message.channel)
    let scopeSettings = records.scopes[Int(message.scope.rawValue)]
    let members = index.channelSize(channelRow)
    let settings = EffectiveSettings(
      thread: message.thread.map { records.threadLevel(channel: message.channel, thread: $0) },
      channel: channelSettings, scope: scopeSettings, user: records.user, app: index.settings,
      traits: ChannelTraits(scope: message.scope, members: members),
      levels: [.channel, .scope, .user])

    // Rules 0 and 1: the sender's choice, and the user's mutes.
    let mutedSender = message.sender.map { records.mutedUsers.contains($0) } ?? false

    // Rule 2: each level's snooze window on its own.
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

    // Rule 3: the local wall clock against the weekly or daily windows.
    let dnd = Self.checkDND(records, zone: index.zone(ofUser: Int(u)), ts: message.ts)

    // Rule 4: the mention test and the level.
    let mention = Explanation.Mention(
      listed: batch.mentions(of: m).contains(u), mentionAll: batch.mentionAll[m],
      repliedTo: batch.replyTo[m] == u, notificationsOn: settings.mentionNotifications.value,
      channelMembers: members, mentionAllMaxMembers: index.settings.mentionAllMaxMembers,
      mentionAllNotificationsOn: settings.mentionAllNotifications.value)
    let (levelRule, levelReason, trigger) = Self.levelRule(message.kind, settings, mention)

    // Rules 6 and 7: the devices and the gateway gate.
    let category: CategoryRecord?
    if let name = message.category { category = try categoryRecord(name) } else { category = nil }
    let devices = records.devices.map {
      let (passes, why) = Self.gate($0, records, category)
      return Explanation.Device(record: $0, passes: passes, why: why)
    }

    // Deferral (rules 2 and 3) and presence (rule 5).
    let zone = index.zone(ofUser: Int(u))
    let quiet: (QuietAction, SettingSource) =
      if let own = records.quietAction {
        (own, .user)
      } else if let app = index.settings.defaultQuietAction {
        (app, .settings)
      } else {
        (.drop, .builtIn)
      }
    var deferral = Explanation.Deferral(
      quietAction: quiet.0, source: quiet.1, instant: nil, localClock: nil, steps: [])
    if quiet.0 == .defer && !message.force && message.kind != .call {
      (deferral.instant, deferral.steps) = Self.firstFreeInstant(
        message.ts, records: records, snooze: [records.user, scopeSettings, channelSettings],
        zone: zone)
      deferral.localClock = deferral.instant.map {
        Self.checkDND(records, zone: zone, ts: $0).clock
      }
    }
    let presenceAction = index.settings.presenceAction ?? .ignore
    let presence = Explanation.Presence(
      action: presenceAction,
      delayMilliseconds: index.settings.presenceDelay,
      windows: records.presence,
      matched: records.presence.first { $0.from <= message.ts && message.ts < $0.until })

    var explanation = Explanation(
      message: message, user: user, pair: .evaluated, settings: settings,
      mutedSender: mutedSender, snoozeWindows: snoozeWindows, dnd: dnd, mention: mention,
      levelRule: levelRule,
      levelReason: levelReason, trigger: trigger, devices: devices, deferral: deferral,
      presence: presence, outcome: nil, decidedBy: nil)
    explanation.throttle = index.settings.throttle.map {
      Explanation.Throttle(
        messages: $0.messages, windowMilliseconds: $0.windowMilliseconds,
        replayed: history.replayed,
        counted: history.counted(at: message.ts, window: $0.windowMilliseconds))
    }
    if !index.members(of: batch.channel[m]).contains(u) {
      explanation.pair = .notMember
    } else if batch.sender[m] == u {
      explanation.pair = .sender
    } else {
      (explanation.outcome, explanation.decidedBy, explanation.deliverAt) = Self.decide(
        explanation)
      // The verdict is the kernel's: the narration must arrive at it. Rule
      // 8's count is the narration's own (from the earlier lines it was
      // given): the kernel is handed it and decides the rest.
      let throttled = explanation.throttle.map { $0.holds(explanation.trigger) } ?? false
      let verdict = kernelVerdict(batch, m, user: u, throttled: throttled)
      let narrated = explanation.outcome.map {
        "\($0.name)"
          + ($0.isDelivered && explanation.deliverAt > message.ts
            ? "@\(explanation.deliverAt)" : "")
      }
      guard verdict == narrated else {
        throw .disagreement(
          "message line \(message.line), user \(Bounded.quoted(user)): narrated \(narrated ?? "no pair"), "
            + "evaluated \(verdict ?? "no pair")")
      }
    }
    return explanation
  }

  /// What `fanout eval` decides for user row `u` on message `m`: the
  /// kernel's decision line for that pair, as `outcome` or
  /// `trigger@deliver_at` when deferred; nil when there is no pair.
  private func kernelVerdict(_ batch: MessageBatch, _ m: Int, user u: Int32, throttled: Bool)
    -> String?
  {
    let evaluator = Evaluator(index: index, output: .deliveriesAndDecisions)
    var result = ChunkResult(gateways: index.gateways.count)
    var members = ThrottledMembers.none
    if throttled {
      members.starts =
        [Int32](repeating: 0, count: m + 1) + [Int32](repeating: 1, count: batch.count - m)
      members.users = [u]
    }
    evaluator.evaluate(batch, messages: m..<(m + 1), throttled: members, into: &result)
    struct Line: Decodable {
      var user: String
      var trigger: String?
      var reason: String?
      var deliverAt: Int64?
      enum CodingKeys: String, CodingKey {
        case user, trigger, reason
        case deliverAt = "deliver_at"
      }
    }
    let user = index.users[Int(u)]
    for line in result.decisionLines.split(separator: UInt8(ascii: "\n")) {
      guard let pair = try? JSONDecoder().decode(Line.self, from: Data(line)), pair.user == user
      else { continue }
      return (pair.trigger ?? pair.reason ?? "") + (pair.deliverAt.map { "@\($0)" } ?? "")
    }
    return nil
  }

  /// The first instant at or after `ts`, within 7 days, that no snooze
  /// window of `snooze`'s levels holds and whose local minute lies in no DND
  /// window — found by stepping through window ends and local minutes, as a
  /// person would read a calendar (the kernel jumps from window to window);
  /// with the windows that held each step, in words.
  static func firstFreeInstant(
    _ ts: Int64, records: UserRecords, snooze levels: [LevelSettings?], zone: ZoneTable
  ) -> (Int64?, [String]) {
    let horizon = ts.addingReportingOverflow(604_800_000)
    let limit = horizon.overflow ? Int64.max : horizon.partialValue
    var steps: [String] = []
    var t = ts
    var dndSince: Int64? = nil
    func closeDND() {
      if let since = dndSince {
        steps.append("in DND from \(Words.time(since)) to \(Words.time(t))")
        dndSince = nil
      }
    }
    while t < limit {
      let holding = levels.compactMap { $0 }.filter { $0.snoozes(at: t) }
      if let end = holding.compactMap(\.snoozeUntil).max() {
        closeDND()
        steps.append("snoozed from \(Words.time(t)) to \(Words.time(end))")
        t = end
        continue
      }
      if checkDND(records, zone: zone, ts: t).matched != nil {
        if dndSince == nil { dndSince = t }
        // The next local minute, or the offset change if it comes first.
        let span = zone.offsetSpan(atMillis: t)
        let offset = Int64(span.offset) &* 1000
        let next = LocalTime.floorDiv(t &+ offset, 60_000) &* 60_000 &+ 60_000 &- offset
        let moved = min(next, span.until)
        guard moved > t else { break }
        t = moved
        continue
      }
      closeDND()
      return (t, steps)
    }
    closeDND()
    return (nil, steps)
  }

  /// The first rule that applies, in the contract's order, and the
  /// delivery time of a delivered pair.
  static func decide(_ e: Explanation) -> (Outcome, Explanation.Rule?, Int64) {
    let ts = e.message.ts
    if e.message.silent { return (.suppressed(.silent), .silent, ts) }
    if e.mutedSender { return (.suppressed(.senderMuted), .senderMuted, ts) }
    var deliverAt = ts
    if e.quiet {
      guard e.deferred, let instant = e.deferral.instant else {
        return e.snoozed ? (.suppressed(.snoozed), .snoozed, ts) : (.suppressed(.dnd), .dnd, ts)
      }
      deliverAt = instant
    }
    if let reason = e.levelReason { return (.suppressed(reason), .level, ts) }
    if e.presence.action != .ignore && e.message.kind != .call && e.presence.matched != nil {
      if e.presence.action == .suppress { return (.suppressed(.active), .active, ts) }
      let delayed = ts.addingReportingOverflow(e.presence.delayMilliseconds)
      deliverAt = max(deliverAt, delayed.overflow ? .max : delayed.partialValue)
    }
    if e.devices.isEmpty { return (.suppressed(.noDevice), .devices, ts) }
    if !e.devices.contains(where: \.passes) { return (.suppressed(.optedOut), .gate, ts) }
    if let throttle = e.throttle, throttle.holds(e.trigger) {
      return (.suppressed(.throttled), .throttled, ts)
    }
    return (.delivered(e.trigger), nil, deliverAt)
  }

  static func checkDND(_ records: UserRecords, zone: ZoneTable, ts: Int64) -> Explanation.DND {
    let offset = zone.offsetSeconds(atMillis: ts)
    let minuteOfWeek = LocalTime.minuteOfWeek(utcMillis: ts, offsetSeconds: offset)
    let weekday = minuteOfWeek / 1440 + 1
    let minute = minuteOfWeek % 1440
    let date = LocalTime.civilFromDays(
      LocalTime.floorDiv(ts &+ Int64(offset) &* 1000, 86_400_000))  // wraps as the kernel's clock
    let clock = Explanation.LocalClock(
      timeZone: records.timeZone, offsetSeconds: offset, year: date.year, month: date.month,
      day: date.day, weekday: weekday, minute: minute)

    // An end of 1439 (23:59) runs to midnight.
    func end(_ e: Int) -> Int { e == 1439 ? 1440 : e }
    if !records.weeklyDND.isEmpty {
      let hit = records.weeklyDND.first {
        $0.weekday == weekday && $0.start <= minute && minute < end($0.end)
      }
      return .init(
        clock: clock, schedule: .weekly(records.weeklyDND, replacedDaily: records.dailyDND),
        matched: hit.map { ($0.weekday, $0.start, $0.end) })
    }
    guard let daily = records.dailyDND else { return .init(clock: clock, schedule: .none) }
    let inside =
      if daily.start == daily.end {
        true
      } else if daily.start < daily.end {
        daily.start <= minute && minute < end(daily.end)
      } else {
        minute >= daily.start || minute < end(daily.end)
      }
    return .init(
      clock: clock, schedule: .daily(daily),
      matched: inside ? (nil, daily.start, daily.end) : nil)
  }

  /// Rule 3 for the message's kind: the words, the reason if it suppresses, the trigger.
  static func levelRule(_ kind: MessageKind, _ s: EffectiveSettings, _ mention: Explanation.Mention)
    -> (String, Reason?, Trigger)
  {
    let chat = s.chatLevel.value
    switch kind {
    case .call:
      return s.callLevel.value == .all
        ? ("a call with call_level all: delivered as a call", nil, .call)
        : ("a call with call_level none: muted", .muted, .call)
    case .pinned where s.pinnedNotifications.value:
      return chat == .none
        ? ("a pinned message (pinned_notifications 1) with chat_level none: muted", .muted, .pinned)
        : (
          "a pinned message (pinned_notifications 1) with chat_level \(chat.name): delivered as pinned",
          nil, .pinned
        )
    case .message, .pinned:
      let what =
        kind == .pinned
        ? "a pinned message with pinned_notifications 0, evaluated as a message" : "a message"
      switch chat {
      case .all:
        return mention.mentioned
          ? ("\(what) with chat_level all, mentioned: delivered as a mention", nil, .mention)
          : ("\(what) with chat_level all: delivered", nil, .message)
      case .mentions:
        return mention.mentioned
          ? ("\(what) with chat_level mentions, mentioned: delivered as a mention", nil, .mention)
          : ("\(what) with chat_level mentions, not mentioned", .notMentioned, .message)
      case .none:
        return ("\(what) with chat_level none: muted", .muted, .message)
      }
    }
  }

  /// The gateway gate for one device: passes, and why.
  static func gate(_ device: DeviceRecord, _ user: UserRecords, _ category: CategoryRecord?)
    -> (Bool, String)
  {
    let g = device.gateway
    if let category, category.mandatoryGateways.contains(g) {
      return (true, "passes: \(g) is mandatory in category \(category.name)")
    }
    if user.restrictedGateways.contains(g) {
      return (false, "blocked: restricted on \(g) (only categories in which \(g) is mandatory)")
    }
    guard let category else { return (true, "passes: no category, not restricted") }
    let rows = user.categoryPreferences.filter { $0.category == category.name }
    let whole: (Preference, String) =
      if category.mandatory {
        (.optIn, "category \(category.name) is mandatory")
      } else if let row = rows.first(where: { $0.gateway == nil }) {
        (row.preference, "the user's category_prefs row for \(category.name)")
      } else {
        (category.defaultPreference, "the default of category \(category.name)")
      }
    if whole.0 == .optOut { return (false, "blocked: opted out by \(whole.1)") }
    if rows.contains(where: { $0.gateway == g && $0.preference == .optOut }) {
      return (false, "blocked: the user opted out of \(category.name) on \(g)")
    }
    return (true, "passes: opted in by \(whole.1)")
  }

  private func userRecords(_ id: String) throws(ExplainError) -> UserRecords? {
    try Self.cached(id, in: &users) { (id) throws(SnapshotError) in try records.user(id) }
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
