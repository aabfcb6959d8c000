import FanoutModel
import FanoutSnapshot
import FanoutTraffic
import FoundationEssentials

/// Stream Chat `upsertPushPreferences`:
/// `{"preferences":[{"user_id","channel_cid"?,"chat_level"?,"call_level"?,"disabled_until"?,"remove_disable"?}]}`.
/// An entry with `channel_cid` is channel-level (channel overrides user);
/// `disabled_until` snoozes that level until then, `remove_disable` lifts it.
enum StreamChanges {
  struct Request: Decodable { var preferences: [Entry] }

  static let shape = ChangeShape.object(
    ["preferences"],
    nested: [
      "preferences": .array(
        .object([
          "user_id", "channel_cid", "chat_level", "call_level", "disabled_until", "remove_disable",
        ]))
    ])

  struct Entry: Decodable {
    var userId: String?
    var channelCid: String?
    var chatLevel: String?
    var callLevel: String?
    var disabledUntil: String?
    var removeDisable: Bool?
  }

  static func apply(_ data: Data, _ context: ApplyContext) throws(ApplyError) -> Int {
    let request = try ApplyContext.decode(Request.self, data, shape: shape)
    return try context.each(request.preferences) { (e) throws(EntryError) in
      let user = try context.user(e.userId, field: "user_id")
      let target: LevelTarget =
        if let cid = e.channelCid { .channel(user: user, channel: try context.channel(cid)) } else {
          .user(user)
        }
      var columns: [(String, ColumnValue)] = []
      if let level = e.chatLevel {
        // 'default' hands the setting back to the next level.
        guard level == "default" || Level(chatLevel: level) != nil else {
          throw EntryError(
            "chat_level \(Bounded.quoted(level)) is not all, mentions, none or default")
        }
        columns.append(("chat_level", level == "default" ? .null : .text(level)))
      }
      if let level = e.callLevel {
        guard level == "default" || Level(callLevel: level) != nil else {
          throw EntryError("call_level \(Bounded.quoted(level)) is not all, none or default")
        }
        columns.append(("call_level", level == "default" ? .null : .text(level)))
      }
      if let until = e.disabledUntil {
        guard let ms = RFC3339.parse(Array(until.utf8)) else {
          throw EntryError(
            "disabled_until \(Bounded.quoted(until)) is not an ISO 8601 / RFC 3339 time with a zone"
          )
        }
        guard e.removeDisable != true else {
          throw EntryError("disabled_until and remove_disable together")
        }
        columns += ApplyContext.snooze((nil, ms))
      } else if e.removeDisable == true {
        columns += ApplyContext.snooze(nil)
      }
      try context.set(
        target, columns, known: "chat_level, call_level, disabled_until, remove_disable")
    }
  }
}
