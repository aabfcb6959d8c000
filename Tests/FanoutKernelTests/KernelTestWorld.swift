import FanoutTestSupport

/// A small world the rule tests adjust with SQL: users a, b, c; a group `g`,
/// a direct channel `d` (a, b) and a broadcast channel `news`; one device each.
let world = """
  INSERT INTO users (user_id) VALUES ('a'), ('b'), ('c');
  INSERT INTO channels (channel_id, kind) VALUES ('g', 'group'), ('d', 'direct'), ('news', 'broadcast');
  INSERT INTO members VALUES ('g', 'a'), ('g', 'b'), ('g', 'c'), ('d', 'a'), ('d', 'b'),
    ('news', 'a'), ('news', 'b'), ('news', 'c');
  INSERT INTO devices VALUES (1, 'a', 'apns', 'ta'), (2, 'b', 'fcm', 'tb'), (3, 'c', 'apns', 'tc');

  """

/// 2026-03-02T12:00:00Z, a Monday.
let noon: Int64 = 1_772_452_800_000

/// One message in `g` from `a` at `noon` unless fields say otherwise.
func msg(
  _ id: String = "m", channel: String = "g", sender: String? = "a", ts: Int64 = noon,
  _ extra: String = ""
)
  -> String
{
  var fields = "\"id\":\"\(id)\",\"channel\":\"\(channel)\",\"ts\":\(ts)"
  if let sender { fields += ",\"sender\":\"\(sender)\"" }
  if !extra.isEmpty { fields += "," + extra }
  return "{\(fields)}"
}

/// Evaluates `messages` in `world` plus `sql`.
func run(_ sql: String, _ messages: String...) throws -> Scenario {
  try Scenario(world + sql, messages: messages)
}

/// Evaluates `messages` in `world` plus `sql`, on the schema with contract
/// v2's optional columns and tables.
func runV2(_ sql: String, _ messages: String...) throws -> Scenario {
  try Scenario(
    snapshot: SQLiteFixture.make(
      SQLiteFixture.header + world + sql, schema: SQLiteFixture.v2Schema),
    messages: messages)
}
