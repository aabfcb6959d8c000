import FanoutModel
import FanoutSQLite
import FanoutSnapshot
import FoundationEssentials

/// SuprSend subscriber preferences, one entry per API call:
/// - category: `{"distinct_id","category","preference"?:"opt_in"|"opt_out","opt_out_channels"?:[…]}`;
///   `opt_out_channels` is the full list of channels opted out in the
///   category (channels not listed are opted back in). A non-editable
///   (mandatory) category, or a channel mandatory in the category, is refused.
/// - channels: `{"distinct_id","channel_preferences":[{"channel","is_restricted"}]}`:
///   a restricted channel ("required" in SuprSend's UI, "all" otherwise)
///   delivers only categories in which it is mandatory.
enum SuprSendChanges {
  static let shape = ChangeShape.array(
    .object(
      ["distinct_id", "category", "preference", "opt_out_channels", "channel_preferences"],
      nested: [
        "opt_out_channels": .array(.scalar),
        "channel_preferences": .array(.object(["channel", "is_restricted"])),
      ]))

  struct Entry: Decodable {
    var distinctId: String?
    var category: String?
    var preference: String?
    var optOutChannels: [String]?
    var channelPreferences: [ChannelPreference]?
  }

  struct ChannelPreference: Decodable {
    var channel: String
    var isRestricted: Bool
  }

  static func apply(_ data: Data, _ context: ApplyContext) throws(ApplyError) -> Int {
    try context.each(try ApplyContext.decode([Entry].self, data, shape: shape)) {
      (e) throws(EntryError) in
      let user = try context.user(e.distinctId, field: "distinct_id")
      switch (e.category, e.channelPreferences) {
      case (let name?, nil):
        try applyCategory(name, e, user, context)
      case (nil, let channels?):
        for c in channels {
          let gateway = try context.gateway(c.channel)
          try context.write { (editor) throws(SQLiteError) in
            try editor.setRestricted(user: user, gateway: gateway, c.isRestricted)
          }
        }
      default:
        throw EntryError(
          "give either category (with preference / opt_out_channels) or channel_preferences")
      }
    }
  }

  private static func applyCategory(
    _ name: String, _ e: Entry, _ user: String, _ context: ApplyContext
  )
    throws(EntryError)
  {
    let category = try context.category(name)
    guard !category.mandatory else {
      throw EntryError(
        "category \(Bounded.quoted(name)) is not editable (mandatory): its preferences cannot change"
      )
    }
    guard e.preference != nil || e.optOutChannels != nil else {
      throw EntryError("the entry changes nothing (fields: preference, opt_out_channels)")
    }
    if let text = e.preference {
      guard let preference = Preference(name: text) else {
        throw EntryError("preference \(Bounded.quoted(text)) is not opt_in or opt_out")
      }
      try context.write { (editor) throws(SQLiteError) in
        try editor.setCategoryPreference(user: user, category: name, gateway: nil, preference)
      }
    }
    guard let channels = e.optOutChannels else { return }
    var optedOut: [String] = []
    for channel in channels {
      let gateway = try context.gateway(channel)
      guard !category.gateways.contains(gateway) else {
        throw EntryError(
          "channel \(Bounded.quoted(gateway)) is not editable in category \(Bounded.quoted(name)) (mandatory there)"
        )
      }
      optedOut.append(gateway)
    }
    var previous: [String] = []
    try context.write { (editor) throws(SQLiteError) in
      previous = try editor.categoryGatewayPreferences(user: user, category: name)
      for gateway in previous where !optedOut.contains(gateway) {
        try editor.setCategoryPreference(user: user, category: name, gateway: gateway, nil)
      }
      for gateway in optedOut {
        try editor.setCategoryPreference(user: user, category: name, gateway: gateway, .optOut)
      }
    }
  }
}
