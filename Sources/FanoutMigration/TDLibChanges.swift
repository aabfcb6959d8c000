import FanoutModel
import FanoutSnapshot
import FoundationEssentials

/// TDLib `setScopeNotificationSettings` and `setChatNotificationSettings`
/// requests, as TDLib's JSON interface writes them (`@type`). They are the
/// client's own settings, so `--as-user` names the user. `mute_for` (seconds)
/// becomes a snooze from --now (0 unmutes); `disable_*` turn mentions and
/// pinned messages into ordinary messages; per chat, `use_default_*: true`
/// clears the chat's value so the scope's applies.
enum TDLibChanges {
  /// TDLib's own fields that Fanout has no column for (sounds, stories) are
  /// accepted and ignored, so that requests as TDLib's clients write them apply.
  static let shape = ChangeShape.array(
    .object(
      ["@type", "@extra", "scope", "chat_id", "notification_settings"],
      nested: [
        "scope": .object(["@type"]),
        "notification_settings": .object([
          "@type", "use_default_mute_for", "mute_for", "use_default_sound", "sound_id",
          "use_default_show_preview", "show_preview", "use_default_mute_stories", "mute_stories",
          "use_default_story_sound", "story_sound_id", "use_default_show_story_poster",
          "show_story_poster", "use_default_disable_pinned_message_notifications",
          "disable_pinned_message_notifications", "use_default_disable_mention_notifications",
          "disable_mention_notifications",
        ]),
      ]))

  struct Request: Decodable {
    var type: String
    var scope: Typed?
    var chatId: StringOrInteger?
    var notificationSettings: Settings?

    enum CodingKeys: String, CodingKey {
      case type = "@type"
      case scope, chatId, notificationSettings
    }
  }

  struct Typed: Decodable {
    var type: String
    enum CodingKeys: String, CodingKey { case type = "@type" }
  }

  struct Settings: Decodable {
    var muteFor: Int64?
    var useDefaultMuteFor: Bool?
    var showPreview: Bool?
    var useDefaultShowPreview: Bool?
    var disableMentionNotifications: Bool?
    var useDefaultDisableMentionNotifications: Bool?
    var disablePinnedMessageNotifications: Bool?
    var useDefaultDisablePinnedMessageNotifications: Bool?
  }

  static func apply(_ data: Data, _ context: ApplyContext) throws(ApplyError) -> Int {
    try context.each(try ApplyContext.decode([Request].self, data, shape: shape)) {
      (r) throws(EntryError) in
      let user = try context.user(nil, field: "user")
      guard let settings = r.notificationSettings else {
        throw EntryError("\(r.type) needs notification_settings")
      }
      switch r.type {
      case "setScopeNotificationSettings":
        guard let name = r.scope?.type, let scope = scope(name) else {
          throw EntryError(
            "scope must be notificationSettingsScopePrivateChats, notificationSettingsScopeGroupChats or notificationSettingsScopeChannelChats"
          )
        }
        try context.set(
          .scope(user: user, scope), columns(settings, context, chat: false), known: fields)
      case "setChatNotificationSettings":
        guard let chat = r.chatId?.text else {
          throw EntryError("setChatNotificationSettings needs chat_id")
        }
        let channel = try context.channel(chat)
        try context.set(
          .channel(user: user, channel: channel), columns(settings, context, chat: true),
          known: fields)
      default:
        throw EntryError(
          "@type \(Bounded.quoted(r.type)) is not setScopeNotificationSettings or setChatNotificationSettings"
        )
      }
    }
  }

  static let fields =
    "mute_for, show_preview, disable_mention_notifications, disable_pinned_message_notifications (and use_default_* per chat)"

  /// notificationSettingsScope… → the snapshot's scope: private chats are direct channels.
  static func scope(_ type: String) -> Scope? {
    switch type {
    case "notificationSettingsScopePrivateChats": .direct
    case "notificationSettingsScopeGroupChats": .group
    case "notificationSettingsScopeChannelChats": .broadcast
    default: nil
    }
  }

  static func columns(_ s: Settings, _ context: ApplyContext, chat: Bool) throws(EntryError)
    -> [(String, ColumnValue)]
  {
    var columns: [(String, ColumnValue)] = []
    func value(_ useDefault: Bool?, _ v: Bool?, _ name: String) throws(EntryError) -> ColumnValue? {
      if useDefault == true {
        guard chat else { throw EntryError("use_default_* applies to chats, not scopes") }
        return .null
      }
      return v.map(ColumnValue.flag)
    }
    if s.useDefaultMuteFor == true {
      guard chat else { throw EntryError("use_default_* applies to chats, not scopes") }
      columns += ApplyContext.snooze(nil)
    } else if let seconds = s.muteFor {
      guard seconds >= 0 else { throw EntryError("mute_for \(seconds) is negative") }
      columns += ApplyContext.snooze(
        seconds == 0
          ? nil : (context.now, context.now.addingSaturated(seconds.multipliedSaturated(by: 1000))))
    }
    if let v = try value(s.useDefaultShowPreview, s.showPreview, "show_preview") {
      columns.append(("show_preview", v))
    }
    // disable_* = true: mentions / pinned messages count as ordinary messages.
    if let v = try value(
      s.useDefaultDisableMentionNotifications, s.disableMentionNotifications.map { !$0 },
      "mention")
    {
      columns.append(("mention_notifications", v))
    }
    if let v = try value(
      s.useDefaultDisablePinnedMessageNotifications,
      s.disablePinnedMessageNotifications.map { !$0 }, "pinned")
    {
      columns.append(("pinned_notifications", v))
    }
    return columns
  }
}
