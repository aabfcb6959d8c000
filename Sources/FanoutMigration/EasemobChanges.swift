import FanoutModel
import FanoutSnapshot
import FoundationEssentials

/// Easemob (Agora Chat) silent mode, one entry per call of
/// `setSilentModeForAll` / `setSilentModeForConversation` /
/// `clearRemindTypeForConversation`:
/// `[{"user","conversation"?,"remind_type"?,"clear_remind_type"?,"interval"?,"duration"?}]`.
/// Remind type All / MentionOnly / NONE at the app (user) or conversation
/// level; the DND interval "H:M-H:M" is app-level only; the DND duration in
/// minutes (0..10080, 0 = no change) becomes a snooze from --now at either level.
enum EasemobChanges {
  static let shape = ChangeShape.array(
    .object(["user", "conversation", "remind_type", "clear_remind_type", "interval", "duration"]))

  struct Entry: Decodable {
    var user: String?
    var conversation: String?
    var remindType: String?
    var clearRemindType: Bool?
    var interval: String?
    var duration: Int?
  }

  static func apply(_ data: Data, _ context: ApplyContext) throws(ApplyError) -> Int {
    try context.each(try ApplyContext.decode([Entry].self, data, shape: shape)) {
      (e) throws(EntryError) in
      let user = try context.user(e.user, field: "user")
      let target: LevelTarget =
        if let c = e.conversation { .channel(user: user, channel: try context.channel(c)) } else {
          .user(user)
        }
      var columns: [(String, ColumnValue)] = []
      if let type = e.remindType {
        guard e.clearRemindType != true else {
          throw EntryError("remind_type and clear_remind_type together")
        }
        columns.append(("chat_level", .level(try remindType(type))))
      } else if e.clearRemindType == true {
        guard e.conversation != nil else {
          throw EntryError("clear_remind_type needs a conversation (the app level has no parent)")
        }
        columns.append(("chat_level", .null))
      }
      if let interval = e.interval {
        guard e.conversation == nil else {
          throw EntryError("the DND interval is app-level only; drop conversation or interval")
        }
        let window = try parseInterval(interval)
        columns.append(("dnd_start", window.map { .int(Int64($0.start)) } ?? .null))
        columns.append(("dnd_end", window.map { .int(Int64($0.end)) } ?? .null))
      }
      if let minutes = e.duration {
        guard (0...10_080).contains(minutes) else {
          throw EntryError("duration \(minutes) is outside 0..10080 minutes (7 days)")
        }
        if minutes > 0 {
          columns += ApplyContext.snooze(
            (context.now, context.now.addingSaturated(Int64(minutes) * 60_000)))
        }
      }
      if columns.isEmpty && e.duration == 0 { return }  // duration 0: explicitly no change
      try context.set(target, columns, known: "remind_type, clear_remind_type, interval, duration")
    }
  }

  static func remindType(_ name: String) throws(EntryError) -> Level {
    switch name.lowercased() {
    case "all": .all
    case "mentiononly", "mention_only", "at": .mentions
    case "none": .none
    default: throw EntryError("remind_type \(Bounded.quoted(name)) is not All, MentionOnly or NONE")
    }
  }

  /// "H:M-H:M" → a daily window; "0:0-0:0" turns DND off (nil). Equal start
  /// and end is the whole day; a start after the end runs past midnight.
  static func parseInterval(_ text: String) throws(EntryError) -> DailyWindow? {
    let parts = text.split(separator: "-", omittingEmptySubsequences: false)
    func minute(_ s: Substring) -> Int? {
      let hm = s.split(separator: ":", omittingEmptySubsequences: false)
      guard hm.count == 2, let h = Int(hm[0]), let m = Int(hm[1]), (0...23).contains(h),
        (0...59).contains(m)
      else { return nil }
      return h * 60 + m
    }
    guard parts.count == 2, let start = minute(parts[0]), let end = minute(parts[1]) else {
      throw EntryError(
        "interval \(Bounded.quoted(text)) is not H:M-H:M with hours 0..23 and minutes 0..59")
    }
    if start == 0 && end == 0 { return nil }
    return DailyWindow(start: start, end: end)
  }
}
