import FanoutMigration
import FanoutTestSupport
import FanoutTraffic
import Foundation
import Testing

/// Three users, a group and a direct channel, devices on apns / email / fcm,
/// and categories: newsletter (editable), security (mandatory), digest
/// (email mandatory in it).
let baseSnapshot = SQLiteFixture.make(
  SQLiteFixture.header + """
    INSERT INTO users (user_id, timezone) VALUES ('u1', 'Asia/Seoul'), ('u2', 'UTC'), ('u3', 'UTC');
    INSERT INTO channels VALUES ('group:g', 'group'), ('dm:u1-u2', 'direct');
    INSERT INTO members VALUES ('group:g', 'u1'), ('group:g', 'u2'), ('group:g', 'u3'),
      ('dm:u1-u2', 'u1'), ('dm:u1-u2', 'u2');
    INSERT INTO devices VALUES (1, 'u1', 'apns', 'a1'), (2, 'u1', 'email', 'u1@example.com'),
      (3, 'u2', 'apns', 'a2'), (4, 'u3', 'fcm', 'f3');
    INSERT INTO categories VALUES ('newsletter', 'opt_in', 0), ('security', 'opt_in', 1),
      ('digest', 'opt_in', 0);
    INSERT INTO category_gateways VALUES ('digest', 'email', 1);
    """)

/// Unix ms of an RFC 3339 time.
func ms(_ text: String) -> Int64 { RFC3339.parse(Array(text.utf8))! }

/// Applies `changes` to a copy of `snapshot` (written with --out, so the
/// source stays as it was) and returns the copy's path.
func applying(
  _ format: SourceFormat, _ changes: String, to snapshot: String = baseSnapshot,
  asUser: String? = nil, now: Int64 = 0
) throws -> String {
  let dir = makeTemporaryDirectory("fanout-prefs")
  try changes.write(toFile: dir + "/changes.json", atomically: true, encoding: .utf8)
  _ = try PrefsApply.run(
    ApplyOptions(
      snapshot: snapshot, format: format, asUser: asUser, now: now, changes: dir + "/changes.json",
      out: dir + "/snapshot.sqlite"))
  return dir + "/snapshot.sqlite"
}

/// The refusal `PrefsApply` gives for `changes`, as text.
func refusal(_ format: SourceFormat, _ changes: String, asUser: String? = nil) -> String {
  do {
    _ = try applying(format, changes, asUser: asUser)
    return "applied"
  } catch {
    return "\(error)"
  }
}

/// What `fanout eval` decides for `user` on one message: a trigger or `-reason`.
func decision(
  _ snapshot: String, user: String, channel: String = "group:g", sender: String = "u3",
  ts: Int64, extra: String = ""
) throws -> String {
  let line =
    #"{"id":"x","channel":"\#(channel)","sender":"\#(sender)","ts":\#(ts)\#(extra)}"#
  let scenario = try Scenario(snapshot: snapshot, messages: [line])
  return try #require(scenario.outcome("x", user), "no pair for \(user)")
}
