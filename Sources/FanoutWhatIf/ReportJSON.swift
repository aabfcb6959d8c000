import FanoutIndex
import FanoutKernel
import FanoutModel

extension WhatIfReport {
  /// `report.json`: fixed key order, no timings, so that the same inputs
  /// give the same bytes.
  public func json() -> [UInt8] {
    Array((document.rendered(.table) + "\n").utf8)
  }

  /// The report as one JSON document (a sweep nests each variant's).
  var document: JSONValue {
    func int(_ i: Int) -> JSONValue { .int(Int64(i)) }
    func counts(_ pairs: [(String, Int)]) -> JSONValue { .object(pairs.map { ($0, int($1)) }) }
    func tally(_ t: Tally) -> JSONValue {
      counts([("delivered", t.delivered), ("suppressed", t.suppressed)])
    }
    func slice(_ key: String, _ labels: [JSONValue], _ a: [Tally], _ b: [Tally]) -> JSONValue {
      .array(
        labels.indices.map {
          .object([(key, labels[$0]), ("a", tally(a[$0])), ("b", tally(b[$0]))])
        })
    }
    func side(_ s: Side) -> JSONValue {
      let t = sides[s.rawValue]
      var fields: [(String, JSONValue)] = [("snapshot", .string(t.snapshot))]
      if let sql = t.sql { fields.append(("sql", .string(sql))) }
      fields += [
        ("pairs", int(t.pairs)), ("delivered", int(t.delivered)), ("deferred", int(t.deferred)),
      ]
      fields.append(("deliveries", counts(deliveries(s).map { ($0.gateway, $0.count) })))
      fields.append(
        ("suppressed", counts(Reason.allCases.map { ($0.name, t.suppressed[Int($0.rawValue)]) })))
      if let n = t.notifications {  // contract v3
        let c = n.counters
        fields.append(
          (
            "notifications",
            .object(
              [
                ("hidden", int(c.hidden)), ("removed", int(c.removed)),
                ("cancelled", int(c.cancelled)), ("unread", int(c.unread)),
                (
                  "badges",
                  counts(
                    BadgeHistogram.labels.indices.map {
                      (BadgeHistogram.labels[$0], n.badges.counts[$0])
                    })
                ),
              ])
          ))
      }
      if let rows = t.rowsChanged {
        fields.append(("rows_changed", counts(rows.map { ($0.table, $0.rows) })))
      }
      return .object(fields)
    }
    func changes(_ key: String, _ list: [Change]) -> JSONValue {
      .array(
        list.map { row in
          var fields: [(String, JSONValue)] = [
            (key, .string(row.id)), ("a", int(row.a)), ("b", int(row.b)),
            ("change", int(row.change)),
          ]
          if let e = row.example {
            var example: [(String, JSONValue)] = [("line", int(e.line))]
            if let message = e.message { example.append(("message", .string(message))) }
            example.append(("user", .string(e.user)))
            fields.append(("example", .object(example)))
          }
          return .object(fields)
        })
    }
    func tenths(_ t: Int) -> JSONValue { .number("\(t / 10).\(t % 10)") }
    func pushes(_ p: PushesPerDay) -> JSONValue {
      .object([
        ("users", int(p.users)), ("p50", tenths(p.p50Tenths)), ("p90", tenths(p.p90Tenths)),
        ("p99", tenths(p.p99Tenths)), ("max", tenths(p.maxTenths)),
        ("over_budget", int(p.overBudget)),
      ])
    }
    let n = Outcome.allCases.count
    let hours = (0..<24).map { JSONValue.int(Int64($0)) }
    return .object([
      ("messages", int(messages)), ("rejected", int(rejected)), ("a", side(.a)), ("b", side(.b)),
      ("changed_pairs", int(changedPairs)), ("users_affected", int(usersAffected)),
      ("days", int(days)),
      ("budget", int(budget)),
      (
        "pushes_per_user_per_day",
        .object([("a", pushes(pushesPerDay[0])), ("b", pushes(pushesPerDay[1]))])
      ),
      ("outcomes", .array(Outcome.allCases.map { .string($0.name) })),
      (
        "transitions",
        .array((0..<n).map { r in .array((0..<n).map { int(transitions[r * n + $0]) }) })
      ),
      (
        "by_channel_kind",
        slice("kind", Scope.allCases.map { .string($0.name) }, slices.byKind(.a), slices.byKind(.b))
      ),
      (
        "by_channel_size",
        slice("size", Slice.sizeBuckets.map { .string($0) }, slices.bySize(.a), slices.bySize(.b))
      ),
      ("by_hour_utc", slice("hour", hours, slices.byHourUTC(.a), slices.byHourUTC(.b))),
      ("by_hour_local", slice("hour", hours, slices.byHourLocal(.a), slices.byHourLocal(.b))),
      (
        "by_delivery_hour_utc",
        slice("hour", hours, slices.byDeliveryHourUTC(.a), slices.byDeliveryHourUTC(.b))
      ),
      ("by_gateway", slice("gateway", gateways.map { .string($0) }, byGateway[0], byGateway[1])),
      ("top_channels", changes("channel", topChannels)),
      ("top_users", changes("user", topUsers)),
    ])
  }
}
