import FanoutIndex
import FanoutModel
import FanoutSnapshot

/// `fanout prefs get`: a user's effective settings and where each came from,
/// their per-scope defaults, and the channels whose own settings change
/// what they would inherit (as Easemob lists only conversations with their
/// own settings).
public struct PreferenceReport: Sendable {
  public struct ChannelEntry: Sendable {
    public var channel: String
    public var scope: Scope
    public var settings: EffectiveSettings
    /// The channel's size for the size rules.
    public var members: Int64
    /// The channel_prefs row's own snooze window, if any.
    public var snooze: (start: Int64?, until: Int64)?
  }

  public var records: UserRecords
  /// The user level alone: users → settings → default.
  public var user: EffectiveSettings
  /// Per scope, in `Scope` order: scope_prefs → users → settings → default.
  public var scopes: [EffectiveSettings]
  public var channels: [ChannelEntry]
  /// The snapshot's settings table (the defaults the chains end in).
  public var app: AppSettings

  /// Reads the report for `user`; `channels` nil means every channel with a
  /// channel_prefs row, otherwise only those named (each must exist).
  public init(
    snapshot path: String, user: String, channels requested: [String]?, cache: IndexCache? = nil
  )
    throws(ExplainError)
  {
    let found: UserRecords?
    let index: Index
    let store: SnapshotRecords
    do {
      // The user's rows are read while the index loads; a refused snapshot
      // is refused first, as eval would refuse it.
      let reading = SnapshotRecords.reading(path, user: user)
      index = try SnapshotLoader.load(path: path, cache: cache).index
      (store, found) = try reading.wait(index: index)
    } catch {
      throw .snapshot(error)
    }
    guard let records = found else { throw .unknownUser(user) }
    self.records = records
    let app = index.settings
    self.app = app
    self.user = EffectiveSettings(
      channel: nil, scope: nil, user: records.user, app: app, traits: nil, levels: [.user])
    scopes = Scope.allCases.map {
      EffectiveSettings(
        channel: nil, scope: records.scopes[Int($0.rawValue)], user: records.user, app: app,
        traits: ChannelTraits(scope: $0, members: nil), levels: [.scope, .user])
    }
    channels = []
    for channel in requested ?? records.channels.map(\.channel) {
      let scope: Scope?
      do { scope = try store.channelScope(channel) } catch { throw .snapshot(error) }
      guard let scope else { throw .unknownChannel(channel) }
      // A channel named on the command line is shown whatever it holds;
      // otherwise only where its own row, or its size, changes something.
      let own = records.channelSettings(channel)
      if requested == nil && own == nil { continue }
      let members = index.channels.find(channel).map { index.channelSize(Int($0)) }
      let settings = EffectiveSettings(
        channel: own, scope: records.scopes[Int(scope.rawValue)], user: records.user, app: app,
        traits: ChannelTraits(scope: scope, members: members), levels: [.channel, .scope, .user])
      let inherited = scopes[Int(scope.rawValue)]
      let snooze = own?.snoozeUntil.map { (own?.snoozeStart, $0) }
      let differs =
        snooze != nil || settings.rows.map(\.value) != inherited.rows.map(\.value)
      if differs || requested != nil {
        channels.append(
          ChannelEntry(
            channel: channel, scope: scope, settings: settings, members: members ?? 0,
            snooze: snooze))
      }
    }
  }

  /// The report for people.
  public func text() -> String {
    let r = records
    var lines = ["user \(r.userID)", "time zone: \(r.timeZone)", "", "settings (first set wins):"]
    lines += Words.settings(user, scope: nil)
    lines.append("snooze (users): " + snoozeText(r.user))
    lines.append("DND: " + dndText())
    lines.append("")
    lines.append("per channel kind:")
    for scope in Scope.allCases {
      let s = scopes[Int(scope.rawValue)]
      let row = r.scopes[Int(scope.rawValue)]
      lines.append(
        "  \(scope.name): " + (row == nil ? "no scope_prefs row; " : "")
          + s.rows.map { "\($0.name) \($0.value) (\(Words.source($0.source, scope: scope)))" }
          .joined(separator: ", "))
      if let row, row.snoozeUntil != nil { lines.append("    snooze: " + snoozeText(row)) }
    }
    lines.append("")
    lines.append(
      channels.isEmpty
        ? "channels with their own settings: none"
        : "channels (\(channels.count)):")
    for c in channels {
      lines.append("  \(c.channel) (\(c.scope.name), \(c.members) members):")
      lines += Words.settings(c.settings, scope: c.scope).map { "  " + $0 }
      if let row = r.channelSettings(c.channel), row.snoozeUntil != nil {
        lines.append("    snooze: " + snoozeText(row))
      }
    }
    lines.append(
      "muted users (user_mutes): "
        + (r.mutedUsers.isEmpty ? "none" : r.mutedUsers.joined(separator: ", ")))
    lines.append("thread levels (thread_prefs):" + (r.threadLevels.isEmpty ? " none" : ""))
    for t in r.threadLevels {
      lines.append("  \(t.channel) thread '\(t.thread)': chat_level \(t.level.name)")
    }
    lines.append("quiet action: \(quietAction.action.name) from \(quietAction.from)")
    lines.append("presence windows (presence):" + (r.presence.isEmpty ? " none" : ""))
    for w in r.presence {
      lines.append("  [\(Words.time(w.from)), \(Words.time(w.until)))")
    }
    lines.append("")
    lines.append("app settings (settings table; the chains above end in them):")
    lines += appSettingsRows.map { "  \($0.key.padding(28))\($0.value)" }
    lines.append("")
    lines.append("devices (\(r.devices.count)):")
    for d in r.devices { lines.append("  \(d.id) \(d.gateway) \(d.token)") }
    lines.append(
      "restricted gateways (required categories only): "
        + (r.restrictedGateways.isEmpty ? "none" : r.restrictedGateways.joined(separator: ", ")))
    lines.append("category preferences:" + (r.categoryPreferences.isEmpty ? " none" : ""))
    for p in r.categoryPreferences {
      lines.append(
        "  \(p.category)" + (p.gateway.map { " on \($0)" } ?? "") + ": "
          + (p.preference == .optIn ? "opt_in" : "opt_out"))
    }
    return lines.joined(separator: "\n") + "\n"
  }

  /// The user's quiet action (contract v2) and where it came from:
  /// users.quiet_action → default_quiet_action → drop.
  var quietAction: (action: QuietAction, from: String) {
    if let own = records.quietAction { return (own, "users") }
    if let app = app.defaultQuietAction { return (app, "settings(default_quiet_action)") }
    return (.drop, "default")
  }

  /// The settings keys that shape every user's decisions, with their
  /// values ("not set" where absent).
  var appSettingsRows: [(key: String, value: String)] {
    func show<V>(_ v: V?) -> String {
      switch v {
      case nil: "not set"
      case let level as Level: level.name
      case let other?: "\(other)"
      }
    }
    var rows: [(key: String, value: String)] = [
      ("default_chat_level", show(app.defaultChatLevel)),
      ("default_call_level", show(app.defaultCallLevel)),
    ]
    for scope in Scope.allCases {
      rows.append(
        ("default_chat_level.\(scope.name)", show(app.kindChatLevel[Int(scope.rawValue)])))
    }
    rows += [
      ("large_channel_members", show(app.largeChannel?.members)),
      ("large_channel_level", show(app.largeChannel?.level)),
      ("mention_all_max_members", show(app.mentionAllMaxMembers)),
      ("presence_action", show(app.presenceAction?.name)),
      ("presence_delay_ms", show(app.presenceDelayMilliseconds)),
      ("default_quiet_action", show(app.defaultQuietAction?.name)),
      ("throttle_messages", show(app.throttle?.messages)),
      ("throttle_window_ms", show(app.throttle?.windowMilliseconds)),
      ("notification_groups", app.notificationGroups == nil ? "off" : "on"),
      ("notification_group_size_max", show(app.notificationGroups?.sizeMax)),
      ("notification_group_count_max", show(app.notificationGroups?.countMax)),
    ]
    return rows
  }

  private func snoozeText(_ s: LevelSettings) -> String {
    guard let until = s.snoozeUntil else { return "none" }
    return "[\(s.snoozeStart.map(Words.time) ?? "the beginning of time"), \(Words.time(until)))"
  }

  private func dndText() -> String {
    if !records.weeklyDND.isEmpty {
      return "weekly " + records.weeklyDND.map(Words.weekly).joined(separator: ", ")
        + (records.dailyDND.map { " (replacing the daily window \(Words.daily($0)))" } ?? "")
    }
    return records.dailyDND.map { "daily \(Words.daily($0))" } ?? "none"
  }

  /// The report for tools.
  public func json() -> JSONValue {
    let r = records
    func snooze(_ s: LevelSettings?) -> JSONValue {
      guard let s, let until = s.snoozeUntil else { return .null }
      return .object([("start", .optional(s.snoozeStart)), ("until", .int(until))])
    }
    return .object([
      ("user", .string(r.userID)), ("time_zone", .string(r.timeZone)),
      ("settings", user.json(scope: nil)), ("snooze", snooze(r.user)),
      (
        "dnd",
        .object([
          (
            "daily",
            r.dailyDND.map {
              .object([("start", .int(Int64($0.start))), ("end", .int(Int64($0.end)))])
            } ?? .null
          ),
          ("weekly", .array(r.weeklyDND.map(weeklyJSON))),
        ])
      ),
      (
        "scopes",
        .object(
          Scope.allCases.map {
            (
              $0.name,
              .object([
                ("settings", scopes[Int($0.rawValue)].json(scope: $0)),
                ("snooze", snooze(r.scopes[Int($0.rawValue)])),
              ])
            )
          })
      ),
      (
        "channels",
        .array(
          channels.map {
            .object([
              ("channel", .string($0.channel)), ("scope", .string($0.scope.name)),
              ("members", .int($0.members)), ("settings", $0.settings.json(scope: $0.scope)),
              ("snooze", snooze(r.channelSettings($0.channel))),
            ])
          })
      ),
      (
        "devices",
        .array(
          r.devices.map {
            .object([
              ("device", .int($0.id)), ("gateway", .string($0.gateway)),
              ("token", .string($0.token)),
            ])
          })
      ),
      ("restricted_gateways", .array(r.restrictedGateways.map(JSONValue.string))),
      ("muted_users", .array(r.mutedUsers.map(JSONValue.string))),
      (
        "thread_levels",
        .array(
          r.threadLevels.map {
            .object([
              ("channel", .string($0.channel)), ("thread", .string($0.thread)),
              ("chat_level", .string($0.level.name)),
            ])
          })
      ),
      (
        "quiet_action",
        .object([("value", .string(quietAction.action.name)), ("from", .string(quietAction.from))])
      ),
      (
        "presence",
        .array(
          r.presence.map { .object([("from", .int($0.from)), ("until", .int($0.until))]) })
      ),
      (
        "app_settings",
        .object(appSettingsRows.map { ($0.key, $0.value == "not set" ? .null : .string($0.value)) })
      ),
      (
        "category_preferences",
        .array(
          r.categoryPreferences.map {
            .object([
              ("category", .string($0.category)), ("gateway", .optional($0.gateway)),
              ("preference", .string($0.preference == .optIn ? "opt_in" : "opt_out")),
            ])
          })
      ),
    ])
  }
}
