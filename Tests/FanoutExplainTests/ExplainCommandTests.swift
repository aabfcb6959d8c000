import FanoutTestSupport
import Foundation
import Testing

private let sampleSnapshot = SQLiteFixture.make(readText(datasetURL("sample/snapshot.sql").path))
private let sampleTraffic = datasetURL("sample/traffic.ndjson").path

private func fanout(_ arguments: [String]) -> (status: Int32, out: String, err: String) {
  let r = runProcess(fanoutExecutable, arguments)
  return (r.status, String(decoding: r.stdout, as: UTF8.self), r.stderr)
}

private func json(_ text: String) throws -> [String: Any] {
  try JSONSerialization.jsonObject(with: Data(text.utf8)) as! [String: Any]
}

@Suite("fanout explain and fanout prefs get, end to end")
struct ExplainCommandTests {
  @Test("a mention delivered: text names the rule path, JSON the chain and the device")
  func mention() throws {
    let args = ["explain", "--snapshot", sampleSnapshot, "--user", "carol"]
    let text = fanout(args + ["--messages", sampleTraffic, "--id", "m2"])
    #expect(text.status == 0, "\(text.err)")
    #expect(text.out.contains("decision: delivered (trigger mention) to 1 device"))
    #expect(text.out.contains("mention test: in mentions with mention_notifications 1: mentioned"))
    #expect(text.out.contains("local time Sun 2026-03-08 03:30 in America/New_York (UTC-04:00)"))

    let line = try #require(
      readText(sampleTraffic).split(separator: "\n").first { $0.contains(#""id":"m2""#) })
    let j = fanout(args + ["--message", String(line), "--json"])
    #expect(j.status == 0, "\(j.err)")
    let object = try json(j.out)
    #expect(object["deliver"] as? Bool == true)
    #expect(object["trigger"] as? String == "mention")
    let chat = try #require((object["settings"] as? [String: Any])?["chat_level"] as? [String: Any])
    #expect(chat["value"] as? String == "mentions")
    #expect(chat["from"] as? String == "users")
    #expect(
      (chat["chain"] as? [[String: Any]])?.map { $0["level"] as! String } == [
        "channel_prefs", "scope_prefs", "users",
      ])
    let devices = try #require(object["devices"] as? [[String: Any]])
    #expect(devices.map { $0["device"] as! Int } == [30])
  }

  @Test("DND: the local time and the window that matched")
  func dnd() throws {
    // Bob: Asia/Shanghai, daily 22:00-07:00; 2026-03-08T15:00Z is 23:00 there.
    let message =
      #"{"id":"x","channel":"messaging:general","sender":"alice","ts":"2026-03-08T15:00:00Z"}"#
    let r = fanout([
      "explain", "--snapshot", sampleSnapshot, "--user", "bob", "--message", message, "--json",
    ])
    #expect(r.status == 0, "\(r.err)")
    let object = try json(r.out)
    #expect(object["reason"] as? String == "dnd")
    let dnd = try #require(object["dnd"] as? [String: Any])
    #expect(dnd["time_zone"] as? String == "Asia/Shanghai")
    #expect(dnd["minute"] as? Int == 23 * 60)
    #expect(dnd["schedule"] as? String == "daily")
    #expect((dnd["matched"] as? [String: Any])?["start"] as? Int == 1320)
    let forced = fanout([
      "explain", "--snapshot", sampleSnapshot, "--user", "bob", "--message",
      message.replacingOccurrences(of: "}", with: #","force":true}"#),
    ])
    #expect(forced.out.contains("3. dnd: skipped (force)"))
    #expect(!forced.out.contains("not delivered: dnd"))
  }

  @Test("no pair, and the exit codes of what cannot be explained")
  func refusals() {
    let base = ["explain", "--snapshot", sampleSnapshot]
    let sender = fanout(base + ["--user", "bob", "--messages", sampleTraffic, "--id", "m2"])
    #expect(sender.status == 0)
    #expect(sender.out.contains("decision: no pair: bob sent the message"))
    #expect(
      fanout(base + ["--user", "nobody", "--messages", sampleTraffic, "--id", "m2"]).status == 64)
    #expect(
      fanout(base + ["--user", "bob", "--messages", sampleTraffic, "--id", "zzz"]).status == 66)
    let rejected = fanout(
      base + ["--user", "bob", "--message", #"{"id":"x","channel":"nope","ts":1}"#])
    #expect(rejected.status == 65)
    #expect(rejected.err.contains("unknown channel 'nope'"))
    #expect(fanout(base + ["--user", "bob"]).status == 64)
  }

  @Test("prefs get: effective settings with their level; channels that differ, or those named")
  func prefsGet() throws {
    let base = ["prefs", "get", "--snapshot", sampleSnapshot, "--user", "carol", "--json"]
    let all = fanout(base)
    #expect(all.status == 0, "\(all.err)")
    let object = try json(all.out)
    let chat = try #require((object["settings"] as? [String: Any])?["chat_level"] as? [String: Any])
    #expect(chat["value"] as? String == "mentions")
    #expect(chat["from"] as? String == "users")
    let channels = try #require(object["channels"] as? [[String: Any]])
    #expect(channels.map { $0["channel"] as! String } == ["team:eng"])

    // A channel named is shown even without a row of its own.
    let some = try json(fanout(base + ["--channel", "messaging:general"]).out)
    #expect(
      (some["channels"] as? [[String: Any]])?.map { $0["channel"] as! String } == [
        "messaging:general"
      ])
    #expect(fanout(base + ["--channel", "no:such"]).status == 64)
    let text = fanout(["prefs", "get", "--snapshot", sampleSnapshot, "--user", "carol"]).out
    #expect(text.contains("DND: daily 00:30–03:20"))

    // Devices are read by the ids the index lists for the user, in order.
    let alice = fanout(["prefs", "get", "--snapshot", sampleSnapshot, "--user", "alice", "--json"])
    let devices = try #require(try json(alice.out)["devices"] as? [[String: Any]])
    #expect(
      devices.map { "\($0["device"]!) \($0["gateway"]!) \($0["token"]!)" } == [
        "10 apns apns-alice-phone", "11 fcm fcm-alice-tablet",
      ])
  }
}
