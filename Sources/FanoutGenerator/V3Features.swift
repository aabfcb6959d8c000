/// Contract v3's features for `fanout gen --v3` (which includes `--v2`'s),
/// drawn from a random stream of their own: notification groups on, with
/// TDLib-like caps (a few notifications per group, a few groups shown), and
/// a read line after about one message in nine (so about 10% of the lines),
/// by a member of its channel a few seconds to ten minutes later — often
/// within the two minutes by which presence delays a push, so some pushes
/// are cancelled.
struct V3Features {
  var random: Random

  init(seed: UInt64) { random = Random(seed: seed ^ 0x7633_BEEF) }

  static let settingsSQL = """
    INSERT INTO settings VALUES ('notification_groups', 'on'),
      ('notification_group_size_max', '4'), ('notification_group_count_max', '3');
    """

  /// A read line after message `i` (in `members`' channel, at `ts`), or nil.
  mutating func readLine(after i: Int, channel: String, members: [Int32], ts: Int64) -> String? {
    guard random.chance(0.111) else { return nil }
    let reader = Population.userID(Int(members[random.below(members.count)]))
    let at = ts + Int64(1 + random.below(600)) * 1000
    return
      #"{"id":"r\#(i)","event":"read","channel":"\#(channel)","user":"\#(reader)","ts":\#(at)}"#
  }
}
