import FanoutIndex
import FanoutKernel
import FanoutModel

extension WhatIfReport {
  /// `report.json`: fixed key order, no timings, so that the same inputs
  /// give the same bytes.
  public func json() -> [UInt8] {
    func q(_ s: String) -> String { String(decoding: JSONText.quoted(s), as: UTF8.self) }
    func tally(_ t: Tally) -> String {
      #"{"delivered":\#(t.delivered),"suppressed":\#(t.suppressed)}"#
    }
    func slice(_ key: String, _ labels: [String], _ a: [Tally], _ b: [Tally]) -> String {
      let rows = labels.indices.map {
        #"    {\#(key):\#(labels[$0]),"a":\#(tally(a[$0])),"b":\#(tally(b[$0]))}"#
      }
      return "[\n" + rows.joined(separator: ",\n") + "\n  ]"
    }
    func side(_ s: Side) -> String {
      let t = sides[s.rawValue]
      let deliveries = deliveries(s).map { "\(q($0.gateway)):\($0.count)" }
      let suppressed = Reason.allCases.map { "\(q($0.name)):\(t.suppressed[Int($0.rawValue)])" }
      return "{\"snapshot\":\(q(t.snapshot)),"
        + (t.sql.map { "\"sql\":\(q($0))," } ?? "")
        + "\"pairs\":\(t.pairs),\"delivered\":\(t.delivered),\"deferred\":\(t.deferred),"
        + "\"deliveries\":{\(deliveries.joined(separator: ","))},"
        + "\"suppressed\":{\(suppressed.joined(separator: ","))}"
        + (t.notifications.map(notificationsJSON) ?? "")
        + (t.rowsChanged.map { rows in
          ",\"rows_changed\":{" + rows.map { "\(q($0.table)):\($0.rows)" }.joined(separator: ",")
            + "}"
        } ?? "") + "}"
    }
    /// `,"notifications":{…,"badges":{"1":n,…}}` (contract v3).
    func notificationsJSON(_ n: Notifications) -> String {
      let c = n.counters
      let badges = BadgeHistogram.labels.indices.map {
        "\(q(BadgeHistogram.labels[$0])):\(n.badges.counts[$0])"
      }
      return
        #","notifications":{"hidden":\#(c.hidden),"removed":\#(c.removed),"cancelled":\#(c.cancelled),"unread":\#(c.unread),"badges":{\#(badges.joined(separator: ","))}}"#
    }
    func changes(_ key: String, _ list: [Change]) -> String {
      if list.isEmpty { return "[]" }
      let rows = list.map { row in
        let example = row.example.map { e in
          #","example":{"line":\#(e.line),"#
            + (e.message.map { #""message":\#(q($0)),"# } ?? "") + #""user":\#(q(e.user))}"#
        }
        return #"    {\#(key):\#(q(row.id)),"a":\#(row.a),"b":\#(row.b),"change":\#(row.change)"#
          + (example ?? "") + "}"
      }
      return "[\n" + rows.joined(separator: ",\n") + "\n  ]"
    }
    let n = Outcome.allCases.count
    let matrix = (0..<n).map { r in
      "    [" + (0..<n).map { String(transitions[r * n + $0]) }.joined(separator: ",") + "]"
    }
    let hours = (0..<24).map(String.init)
    func tenths(_ t: Int) -> String { "\(t / 10).\(t % 10)" }
    func pushes(_ p: PushesPerDay) -> String {
      #"{"users":\#(p.users),"p50":\#(tenths(p.p50Tenths)),"p90":\#(tenths(p.p90Tenths)),"p99":\#(tenths(p.p99Tenths)),"max":\#(tenths(p.maxTenths)),"over_budget":\#(p.overBudget)}"#
    }
    let text = """
      {
        "messages": \(messages),
        "rejected": \(rejected),
        "a": \(side(.a)),
        "b": \(side(.b)),
        "changed_pairs": \(changedPairs),
        "users_affected": \(usersAffected),
        "days": \(days),
        "budget": \(budget),
        "pushes_per_user_per_day": {"a": \(pushes(pushesPerDay[0])), "b": \(pushes(pushesPerDay[1]))},
        "outcomes": [\(Outcome.allCases.map { q($0.name) }.joined(separator: ","))],
        "transitions": [
      \(matrix.joined(separator: ",\n"))
        ],
        "by_channel_kind": \(slice("\"kind\"", Scope.allCases.map { q($0.name) }, slices.byKind(.a), slices.byKind(.b))),
        "by_channel_size": \(slice("\"size\"", Slice.sizeBuckets.map(q), slices.bySize(.a), slices.bySize(.b))),
        "by_hour_utc": \(slice("\"hour\"", hours, slices.byHourUTC(.a), slices.byHourUTC(.b))),
        "by_hour_local": \(slice("\"hour\"", hours, slices.byHourLocal(.a), slices.byHourLocal(.b))),
        "by_delivery_hour_utc": \(slice("\"hour\"", hours, slices.byDeliveryHourUTC(.a), slices.byDeliveryHourUTC(.b))),
        "by_gateway": \(slice("\"gateway\"", gateways.map(q), byGateway[0], byGateway[1])),
        "top_channels": \(changes("\"channel\"", topChannels)),
        "top_users": \(changes("\"user\"", topUsers))
      }

      """
    return Array(text.utf8)
  }
}
