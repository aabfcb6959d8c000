import FanoutKernel
import FanoutModel
import FanoutSnapshot
import FanoutTime

/// How times, windows and settings read in the explanations.
enum Words {
  static let weekdays = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]

  static func clock(_ minute: Int) -> String {
    let h = minute / 60
    let m = minute % 60
    return (h < 10 ? "0" : "") + "\(h):" + (m < 10 ? "0" : "") + "\(m)"
  }

  /// A window `[start, end)` of the local day; 23:59 reads "24:00" (it runs to midnight).
  static func window(_ start: Int, _ end: Int) -> String {
    "\(clock(start))–\(end == 1439 ? "24:00" : clock(end))"
  }

  static func daily(_ w: DailyWindow) -> String {
    if w.start == w.end { return "all day (start = end \(clock(w.start)))" }
    return window(w.start, w.end) + (w.start > w.end ? " (past midnight)" : "")
  }

  static func weekly(_ w: WeeklyWindow) -> String {
    "\(weekdays[w.weekday - 1]) \(window(w.start, w.end))"
  }

  static func time(_ ms: Int64) -> String { "\(ms) (\(LocalTime.rfc3339UTC(millis: ms)))" }

  /// The kernel's gate verdict on a device on `gateway`, for `category`.
  static func gate(_ verdict: GateVerdict, gateway g: String, category: String?) -> String {
    let c = category ?? ""
    switch verdict {
    case .mandatoryGateway: return "passes: \(g) is mandatory in category \(c)"
    case .restricted:
      return "blocked: restricted on \(g) (only categories in which \(g) is mandatory)"
    case .noCategory: return "passes: no category, not restricted"
    case .optedInMandatory: return "passes: opted in by category \(c) is mandatory"
    case .optedInByUser: return "passes: opted in by the user's category_prefs row for \(c)"
    case .optedInByDefault: return "passes: opted in by the default of category \(c)"
    case .optedOutByUser: return "blocked: opted out by the user's category_prefs row for \(c)"
    case .optedOutByDefault: return "blocked: opted out by the default of category \(c)"
    case .optedOutOnGateway: return "blocked: the user opted out of \(c) on \(g)"
    }
  }

  /// The kernel's deferral steps, consecutive DND steps as one.
  static func steps(_ steps: [DeferralStep]) -> [String] {
    var words: [String] = []
    var dndSince: Int64? = nil
    for (k, step) in steps.enumerated() {
      if step.snoozed {
        words.append("snoozed from \(time(step.from)) to \(time(step.to))")
        continue
      }
      if dndSince == nil { dndSince = step.from }
      if k + 1 == steps.count || steps[k + 1].snoozed {
        words.append("in DND from \(time(dndSince!)) to \(time(step.to))")
        dndSince = nil
      }
    }
    return words
  }

  /// Rule 4's verdict (the kernel's reason and trigger) in words, with the
  /// settings it read.
  static func levelRule(
    _ kind: MessageKind, _ s: EffectiveSettings, reason: Reason?, trigger: Trigger
  ) -> String {
    let chat = s.chatLevel.value
    if kind == .call {
      return reason == nil
        ? "a call with call_level all: delivered as a call"
        : "a call with call_level none: muted"
    }
    if trigger == .pinned {
      return reason == nil
        ? "a pinned message (pinned_notifications 1) with chat_level \(chat.name): delivered as pinned"
        : "a pinned message (pinned_notifications 1) with chat_level none: muted"
    }
    let what =
      kind == .pinned
      ? "a pinned message with pinned_notifications 0, evaluated as a message" : "a message"
    switch reason {
    case .muted?: return "\(what) with chat_level none: muted"
    case .notMentioned?: return "\(what) with chat_level mentions, not mentioned"
    default:
      return trigger == .mention
        ? "\(what) with chat_level \(chat.name), mentioned: delivered as a mention"
        : "\(what) with chat_level all: delivered"
    }
  }

  static func offset(_ seconds: Int32) -> String {
    let sign = seconds < 0 ? "-" : "+"
    let m = Int(abs(seconds)) / 60
    return "UTC\(sign)\(clock(m))"
  }

  static func value<V>(_ v: V?) -> String {
    switch v {
    case nil: "NULL"
    case let level as Level: level.name
    case let b as Bool: flag(b)
    case let other?: "\(other)"
    }
  }

  static func source(_ s: SettingSource, scope: Scope?) -> String {
    switch s {
    case .scope: scope.map { "scope_prefs(\($0.name))" } ?? s.name
    case .largeChannel: "settings(large_channel_level)"
    case .kind: scope.map { "settings(default_chat_level.\($0.name))" } ?? s.name
    default: s.name
    }
  }

  /// `chat_level  mentions  from scope_prefs(group)  [channel_prefs: NULL → scope_prefs(group): mentions]`
  static func resolution<V>(_ name: String, _ r: Resolution<V>, scope: Scope?) -> String {
    let chain = r.chain.map { "\(source($0.source, scope: scope)): \(value($0.value))" }
    return "  " + name.padding(26) + value(r.value).padding(10) + "from "
      + source(r.source, scope: scope).padding(24) + "[" + chain.joined(separator: " → ") + "]"
  }

  static func settings(_ s: EffectiveSettings, scope: Scope?) -> [String] {
    [
      resolution("chat_level", s.chatLevel, scope: scope),
      resolution("call_level", s.callLevel, scope: scope),
      resolution("mention_notifications", s.mentionNotifications, scope: scope),
      resolution("pinned_notifications", s.pinnedNotifications, scope: scope),
      resolution("show_preview", s.showPreview, scope: scope),
      resolution("mention_all_notifications", s.mentionAllNotifications, scope: scope),
    ]
  }
}

extension String {
  func padding(_ width: Int) -> String {
    count >= width ? self + " " : self + String(repeating: " ", count: width - count)
  }
}

extension Explanation {
  /// The decision in one line.
  public var verdict: String {
    switch pair {
    case .notMember: return "no pair: \(user) is not a member of \(message.channel)"
    case .sender: return "no pair: \(user) sent the message"
    case .evaluated: break
    }
    let outcome = outcome!  // every evaluated pair has one
    if outcome.isDelivered {
      return "delivered (trigger \(trigger.name)) to \(passingDevices.count) device"
        + (passingDevices.count == 1 ? "" : "s")
        + (deliverAt > message.ts ? ", deferred to \(Words.time(deliverAt))" : "")
    }
    return "not delivered: \(outcome.name) (rule \(decidedBy!.rawValue))"
  }

  /// The explanation for people.
  public func text() -> String {
    var lines: [String] = []
    let m = message
    lines.append(
      "message \(m.id) (line \(m.line)): \(m.kind.name) in \(m.channel) (\(m.scope.name), "
        + "\(mention.channelMembers) members)"
        + (m.thread.map { ", thread '\($0)'" } ?? "")
        + (m.category.map { ", category \($0)" } ?? "") + (m.force ? ", force" : "")
        + (m.silent ? ", silent" : ""))
    lines.append("  ts \(Words.time(m.ts))" + (m.sender.map { ", sender \($0)" } ?? ""))
    lines.append("user \(user)")
    lines.append("decision: \(verdict)")
    guard pair == .evaluated else { return lines.joined(separator: "\n") + "\n" }

    lines.append("")
    lines.append("settings (first set wins):")
    lines += Words.settings(settings, scope: m.scope)

    func heading(_ rule: Rule, _ result: String) {
      lines.append("")
      let reached = decidedBy.map { rule.rawValue <= $0.rawValue } ?? true
      lines.append(
        "\(rule.rawValue). \(rule.name): " + (reached ? result : "\(result) (not reached)"))
    }

    heading(.silent, m.silent ? "yes, the sender asked for no notification" : "no")
    heading(
      .senderMuted,
      mutedSender
        ? "yes, \(user) muted the sender \(m.sender ?? "")"
        : m.sender == nil ? "no (no sender)" : "no, \(user) has not muted \(m.sender!)")

    heading(.snoozed, m.force ? "skipped (force)" : (snoozed ? "yes" : "no"))
    if snoozeWindows.isEmpty { lines.append("   no snooze window at any level") }
    for w in snoozeWindows {
      let from = w.start.map(Words.time) ?? "the beginning of time"
      lines.append(
        "   \(Words.source(w.source, scope: m.scope)): [\(from), \(Words.time(w.until))) "
          + (w.containsTS ? "holds ts" : "does not hold ts"))
    }

    let c = dnd.clock
    heading(.dnd, m.force ? "skipped (force)" : (inDND ? "yes" : "no"))
    lines.append(
      "   local time \(Words.weekdays[c.weekday - 1]) \(c.year)-\(pad2(c.month))-\(pad2(c.day)) "
        + "\(Words.clock(c.minute)) in \(c.timeZone) (\(Words.offset(c.offsetSeconds))), minute \(c.minute)"
    )
    switch dnd.schedule {
    case .none:
      lines.append("   no DND window")
    case .daily(let w):
      lines.append(
        "   daily window \(Words.daily(w)): " + (inDND ? "holds it" : "does not hold it"))
    case .weekly(let windows, let replaced):
      lines.append("   weekly windows: " + windows.map(Words.weekly).joined(separator: ", "))
      if let replaced {
        lines.append("   (they replace the daily window \(Words.daily(replaced)))")
      }
      if let hit = dnd.matched {
        lines.append(
          "   \(Words.weekdays[hit.weekday! - 1]) \(Words.window(hit.start, hit.end)) holds it")
      } else {
        lines.append("   none holds it")
      }
    }

    if quiet {
      let d = deferral
      let from = Words.source(d.source, scope: nil)
      if m.kind == .call {
        lines.append(
          "   quiet_action \(d.quietAction.name) (from \(from)): calls are never deferred")
      } else if d.quietAction != .defer {
        lines.append("   quiet_action \(d.quietAction.name) (from \(from)): dropped")
      } else if let instant = d.instant, let clock = d.localClock {
        lines.append(
          "   quiet_action defer (from \(from)): deferred to \(Words.time(instant)), local "
            + "\(Words.weekdays[clock.weekday - 1]) \(clock.year)-\(pad2(clock.month))-\(pad2(clock.day)) "
            + "\(Words.clock(clock.minute)) (\(Words.offset(clock.offsetSeconds)))")
        for step in d.steps { lines.append("     \(step)") }
      } else {
        lines.append(
          "   quiet_action defer (from \(from)): no free instant within 7 days, so dropped")
      }
    }

    heading(.level, levelReason?.name ?? "passes")
    if m.kind != .call {
      var how: [String] = []
      if mention.listed { how.append("in mentions") }
      if mention.mentionAllCounts { how.append("mention_all") }
      if mention.repliedTo { how.append("reply_to") }
      let test =
        how.isEmpty
        ? "not mentioned"
        : how.joined(separator: ", ")
          + (mention.notificationsOn
            ? " with mention_notifications 1: mentioned"
            : " but mention_notifications 0: not mentioned")
      lines.append("   mention test: \(test)")
      if mention.mentionAll && !mention.mentionAllApplies {
        lines.append(
          "   mention_all has no effect: the channel has \(mention.channelMembers) members, "
            + "more than mention_all_max_members \(mention.mentionAllMaxMembers!)")
      } else if mention.mentionAll && !mention.mentionAllNotificationsOn {
        lines.append(
          "   mention_all is not a mention for \(user): mention_all_notifications 0 (from "
            + "\(Words.source(settings.mentionAllNotifications.source, scope: m.scope)))")
      }
    }
    let chat = settings.chatLevel
    lines.append(
      "   chat_level \(chat.value.name) set by "
        + Words.source(chat.source, scope: m.scope)
        + (chat.source == .largeChannel
          ? " (the channel has \(mention.channelMembers) members, more than large_channel_members)"
          : "")
        + (m.thread != nil && chat.source != .thread
          ? " (no thread_prefs row for this thread)" : ""))
    lines.append("   \(levelRule)")

    let p = presence
    let active =
      self.active
      ? (p.action == .suppress
        ? "yes"
        : "delayed by \(p.delayMilliseconds) ms to \(Words.time(m.ts.addingSaturated(p.delayMilliseconds)))")
      : "no"
    heading(.active, active)
    lines.append(
      "   presence_action \(p.action.name)"
        + (p.action == .delay ? ", presence_delay_ms \(p.delayMilliseconds)" : "")
        + (m.kind == .call && p.action != .ignore ? " (calls are exempt)" : ""))
    if let w = p.matched {
      lines.append("   active [\(Words.time(w.from)), \(Words.time(w.until))) holds ts")
    } else {
      lines.append(
        p.windows.isEmpty
          ? "   no presence window" : "   \(p.windows.count) presence window(s), none holds ts")
    }

    heading(.devices, devices.isEmpty ? "yes, no device" : "no, \(devices.count) device(s)")
    heading(.gate, !devices.isEmpty && !devices.contains(where: \.passes) ? "yes" : "no")
    for d in devices {
      lines.append("   device \(d.record.id) \(d.record.gateway) \(d.record.token): \(d.why)")
    }
    if m.category == nil { lines.append("   (no category)") }

    if let n = notification {
      lines.append("")
      lines.append(
        "notification (contract v3): group \(n.group), notification \(n.id), badge \(n.badge)"
          + (n.hid.isEmpty ? "" : ", hid " + n.hid.map(String.init).joined(separator: ", ")))
      if let read = n.removedBy {
        lines.append(
          "   removed by read line \(read.line) (id \(read.id)) at \(Words.time(read.ts)): "
            + (read.cancelled
              ? "cancelled, read before it was due" : "it had been sent; the badge goes down"))
      } else {
        lines.append("   no later read line removed it: still unread at the end of the file")
      }
    }

    if let t = throttle {
      heading(.throttled, t.holds ? "yes" : "no")
      lines.append(
        "   at most \(t.messages) 'message' deliveries per \(t.windowMilliseconds) ms in this channel"
          + (trigger == .message ? "" : " (a \(trigger.name) is neither throttled nor counted)"))
      if !t.replayed {
        lines.append(
          "   no earlier lines: a lone message (give --messages FILE --id M to count them)")
      } else if t.counted.isEmpty {
        lines.append("   no earlier line delivered to \(user) here in (ts − window, ts]")
      }
      for d in t.counted {
        lines.append("   counted: line \(d.line), message \(d.message) at \(Words.time(d.ts))")
      }
    }
    return lines.joined(separator: "\n") + "\n"
  }

  /// The explanation for tools.
  public func json() -> JSONValue {
    var fields: [(String, JSONValue)] = [
      ("message", .string(message.id)), ("line", .int(Int64(message.line))),
      ("channel", .string(message.channel)), ("scope", .string(message.scope.name)),
      ("kind", .string(message.kind.name)), ("ts", .int(message.ts)),
      ("force", .bool(message.force)), ("silent", .bool(message.silent)),
      ("thread", .optional(message.thread)), ("category", .optional(message.category)),
      ("user", .string(user)),
    ]
    switch pair {
    case .notMember: return .object(fields + [("pair", .string("not_member"))])
    case .sender: return .object(fields + [("pair", .string("sender"))])
    case .evaluated: fields.append(("pair", .string("evaluated")))
    }
    let outcome = outcome!
    fields.append(("deliver", .bool(outcome.isDelivered)))
    fields.append(
      outcome.isDelivered ? ("trigger", .string(trigger.name)) : ("reason", .string(outcome.name)))
    fields.append(("decided_by_rule", decidedBy.map { .int(Int64($0.rawValue)) } ?? .null))
    if outcome.isDelivered && deliverAt > message.ts {
      fields.append(("deliver_at", .int(deliverAt)))
    }
    fields.append(
      (
        "deferral",
        .object([
          ("quiet_action", .string(deferral.quietAction.name)),
          ("from", .string(deferral.source.name)),
          ("deferred", .bool(deferred)),
          ("deliver_at", .optional(deferred ? deferral.instant : nil)),
          ("steps", .array(deferral.steps.map(JSONValue.string))),
        ])
      ))
    fields.append(
      (
        "presence",
        .object([
          ("action", .string(presence.action.name)), ("delay_ms", .int(presence.delayMilliseconds)),
          (
            "matched",
            presence.matched.map { .object([("from", .int($0.from)), ("until", .int($0.until))]) }
              ?? .null
          ),
        ])
      ))
    if let t = throttle {
      fields.append(
        (
          "throttle",
          .object([
            ("messages", .int(t.messages)), ("window_ms", .int(t.windowMilliseconds)),
            ("replayed", .bool(t.replayed)), ("throttled", .bool(t.holds)),
            (
              "counted",
              .array(
                t.counted.map {
                  .object([
                    ("line", .int(Int64($0.line))), ("message", .string($0.message)),
                    ("ts", .int($0.ts)),
                  ])
                })
            ),
          ])
        ))
    }
    if let n = notification {
      fields.append(
        (
          "notification",
          .object([
            ("group", .int(n.group)), ("id", .int(n.id)), ("badge", .int(n.badge)),
            ("hid", .array(n.hid.map(JSONValue.int))),
            (
              "removed_by",
              n.removedBy.map {
                .object([
                  ("line", .int(Int64($0.line))), ("id", .string($0.id)), ("ts", .int($0.ts)),
                  ("cancelled", .bool($0.cancelled)),
                ])
              } ?? .null
            ),
          ])
        ))
    }
    fields.append(("settings", settings.json(scope: message.scope)))
    fields.append(("sender_muted", .bool(mutedSender)))
    fields.append(
      (
        "snooze",
        .object([
          ("snoozed", .bool(snoozed)),
          (
            "windows",
            .array(
              snoozeWindows.map {
                .object([
                  ("level", .string($0.source.name)), ("start", .optional($0.start)),
                  ("until", .int($0.until)), ("holds_ts", .bool($0.containsTS)),
                ])
              })
          ),
        ])
      ))
    let c = dnd.clock
    var dndFields: [(String, JSONValue)] = [
      ("time_zone", .string(c.timeZone)), ("offset_seconds", .int(Int64(c.offsetSeconds))),
      ("local_date", .string("\(c.year)-\(pad2(c.month))-\(pad2(c.day))")),
      ("weekday", .int(Int64(c.weekday))), ("minute", .int(Int64(c.minute))),
    ]
    switch dnd.schedule {
    case .none:
      dndFields.append(("schedule", .string("none")))
    case .daily(let w):
      dndFields.append(("schedule", .string("daily")))
      dndFields.append(
        ("daily", .object([("start", .int(Int64(w.start))), ("end", .int(Int64(w.end)))])))
    case .weekly(let windows, _):
      dndFields.append(("schedule", .string("weekly")))
      dndFields.append(("weekly", .array(windows.map(weeklyJSON))))
    }
    dndFields.append(
      (
        "matched",
        dnd.matched.map {
          .object(
            ($0.weekday.map { [("weekday", JSONValue.int(Int64($0)))] } ?? [])
              + [("start", .int(Int64($0.start))), ("end", .int(Int64($0.end)))])
        } ?? .null
      ))
    dndFields.append(("in_dnd", .bool(inDND)))
    fields.append(("dnd", .object(dndFields)))
    fields.append(
      (
        "mention",
        .object([
          ("in_mentions", .bool(mention.listed)), ("mention_all", .bool(mention.mentionAll)),
          ("reply_to", .bool(mention.repliedTo)),
          ("mention_notifications", .bool(mention.notificationsOn)),
          ("channel_members", .int(mention.channelMembers)),
          ("mention_all_max_members", .optional(mention.mentionAllMaxMembers)),
          ("mention_all_applies", .bool(mention.mentionAllApplies)),
          ("mention_all_notifications", .bool(mention.mentionAllNotificationsOn)),
          ("mentioned", .bool(mention.mentioned)),
        ])
      ))
    fields.append(("level_rule", .string(levelRule)))
    fields.append(
      (
        "devices",
        .array(
          devices.map {
            .object([
              ("device", .int($0.record.id)), ("gateway", .string($0.record.gateway)),
              ("token", .string($0.record.token)), ("passes", .bool($0.passes)),
              ("why", .string($0.why)),
            ])
          })
      ))
    return .object(fields)
  }
}

func weeklyJSON(_ w: WeeklyWindow) -> JSONValue {
  .object([
    ("weekday", .int(Int64(w.weekday))), ("start", .int(Int64(w.start))),
    ("end", .int(Int64(w.end))),
  ])
}

func pad2(_ v: Int64) -> String { v < 10 ? "0\(v)" : "\(v)" }

extension EffectiveSettings {
  func json(scope: Scope?) -> JSONValue {
    func entry<V>(_ r: Resolution<V>, _ render: (V) -> JSONValue) -> JSONValue {
      .object([
        ("value", render(r.value)), ("from", .string(r.source.name)),
        (
          "chain",
          .array(
            r.chain.map {
              .object([
                ("level", .string($0.source.name)), ("value", $0.value.map(render) ?? .null),
              ])
            })
        ),
      ])
    }
    let level: (Level) -> JSONValue = { .string($0.name) }
    return .object([
      ("chat_level", entry(chatLevel, level)), ("call_level", entry(callLevel, level)),
      ("mention_notifications", entry(mentionNotifications, JSONValue.bool)),
      ("pinned_notifications", entry(pinnedNotifications, JSONValue.bool)),
      ("show_preview", entry(showPreview, JSONValue.bool)),
      ("mention_all_notifications", entry(mentionAllNotifications, JSONValue.bool)),
    ])
  }
}
