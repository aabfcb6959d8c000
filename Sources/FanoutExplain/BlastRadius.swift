import FanoutIndex
import FanoutKernel
import FanoutModel
import FanoutTime
import FanoutTraffic

/// Who one message reaches, before it is sent: `fanout explain` without
/// `--user`. The counts are the kernel's for that one line, exactly what
/// `fanout eval` writes for a traffic file holding only it (no earlier
/// lines: no throttle count, every notification its user's first).
public struct BlastRadius: Sendable {
  /// One pair: the member, its outcome, and a deferred pair's delivery time.
  public struct Pair: Sendable {
    public var user: String
    public var outcome: Outcome
    public var deliverAt: Int64?
  }

  public var message: Explanation.Message
  /// The channel's rows in `members`, and its size for the size rules.
  public var members: Int
  public var channelSize: Int64
  public var pairs: Int
  public var delivered: Int
  public var deferred: Int
  /// Per reason, in rule order.
  public var suppressed: [Int]
  /// Deliveries (devices) per gateway name, the gateways with none left out.
  public var deliveries: [(gateway: String, count: Int)]
  /// Deferred pairs per UTC hour of delivery (0–23).
  public var deferredByHour: [Int]
  /// Contract v3: the delivered pairs' badges, when notification groups are on.
  public var badges: BadgeHistogram?
  /// Every pair, in output order (users in byte order).
  public var pairList: [Pair]
}

extension Explainer {
  /// The blast radius of message line `text`.
  public func blastRadius(line text: String) throws(ExplainError) -> BlastRadius {
    let batch = try parseOne(text, number: 1)
    let message = describe(batch, 0, text: text)
    let one = 0..<1
    var outcomes = ChunkResult(gateways: index.gateways.count)
    Evaluator(index: index, output: .outcomes).evaluate(batch, messages: one, into: &outcomes)
    var delivered = ChunkResult(gateways: index.gateways.count)
    Evaluator(index: index, output: .deliveredPairs).evaluate(
      batch, messages: one, into: &delivered)
    let c = outcomes.counters
    let channel = batch.channel[0]
    var radius = BlastRadius(
      message: message, members: index.members(of: channel).count,
      channelSize: index.channelSize(Int(channel)), pairs: c.pairs, delivered: c.delivered,
      deferred: c.deferred, suppressed: c.suppressed,
      deliveries: (0..<index.gateways.count).filter { c.deliveries[$0] > 0 }
        .map { (index.gateways[$0], c.deliveries[$0]) }
        .sorted { $0.gateway.utf8.lexicographicallyPrecedes($1.gateway.utf8) },
      deferredByHour: [Int](repeating: 0, count: 24), badges: nil, pairList: [])
    var next = 0  // the delivered pairs, in the same member order
    for (k, user) in outcomes.pairUsers.enumerated() {
      let outcome = outcomes.pairOutcomes[k]
      var deliverAt: Int64? = nil
      if outcome.isDelivered {
        let at = delivered.delivered.deliverAt[next]
        next += 1
        if at > batch.ts[0] {
          deliverAt = at
          radius.deferredByHour[LocalTime.utcHour(millis: at)] += 1
        }
      }
      radius.pairList.append(
        .init(user: index.users[Int(user)], outcome: outcome, deliverAt: deliverAt))
    }
    // A fresh ledger: the message as if it were the first line.
    if let wave = Ledgers(index: index, threads: 1)?.judge([batch], plan: [(0, one)]).notifications
    {
      var badges = BadgeHistogram()
      badges.add(wave.fields[0])
      radius.badges = badges
    }
    return radius
  }
}

extension BlastRadius {
  /// The blast radius for people; with `users`, every pair too.
  public func text(users: Bool) -> String {
    let m = message
    var lines = [
      "message \(m.id): \(m.kind.name) in \(m.channel) (\(m.scope.name), \(members) members)"
        + (m.category.map { ", category \($0)" } ?? "") + (m.force ? ", force" : "")
        + (m.silent ? ", silent" : ""),
      "  ts \(Words.time(m.ts))" + (m.sender.map { ", sender \($0)" } ?? ""),
      "",
      "blast radius: \(counted(pairs, "pair")), \(delivered) delivered"
        + (deferred > 0 ? " (\(deferred) deferred)" : "") + ", \(pairs - delivered) suppressed",
    ]
    if !deliveries.isEmpty {
      lines.append(
        "  deliveries: " + deliveries.map { "\($0.gateway) \($0.count)" }.joined(separator: ", "))
    }
    let reasons = Reason.allCases.filter { suppressed[Int($0.rawValue)] > 0 }
    if !reasons.isEmpty {
      lines.append(
        "  suppressed: "
          + reasons.map { "\($0.name) \(suppressed[Int($0.rawValue)])" }.joined(separator: ", "))
    }
    let hours = (0..<24).filter { deferredByHour[$0] > 0 }
    if !hours.isEmpty {
      lines.append(
        "  deferred, by UTC hour of delivery: "
          + hours.map { "\(Words.clock($0 * 60)) \(deferredByHour[$0])" }.joined(separator: ", "))
    }
    if let badges {
      let buckets = badges.counts.indices.filter { badges.counts[$0] > 0 }
      lines.append(
        "  badges (contract v3, as the first line of a run): "
          + buckets.map { "\(BadgeHistogram.labels[$0]): \(badges.counts[$0])" }
          .joined(separator: ", "))
    }
    if users {
      lines.append("")
      for pair in pairList {
        lines.append(
          "  \(pair.user): \(pair.outcome.name)"
            + (pair.deliverAt.map { " at \(Words.time($0))" } ?? ""))
      }
    }
    return lines.joined(separator: "\n") + "\n"
  }

  /// The blast radius for tools; with `users`, every pair too.
  public func json(users: Bool) -> JSONValue {
    var fields: [(String, JSONValue)] = [
      ("message", .string(message.id)), ("channel", .string(message.channel)),
      ("kind", .string(message.kind.name)), ("ts", .int(message.ts)),
      ("members", .int(Int64(members))), ("channel_size", .int(channelSize)),
      ("pairs", .int(Int64(pairs))), ("delivered", .int(Int64(delivered))),
      ("deferred", .int(Int64(deferred))),
      ("deliveries", .object(deliveries.map { ($0.gateway, .int(Int64($0.count))) })),
      (
        "suppressed",
        .object(Reason.allCases.map { ($0.name, .int(Int64(suppressed[Int($0.rawValue)]))) })
      ),
      (
        "deferred_by_utc_hour",
        .object(
          (0..<24).filter { deferredByHour[$0] > 0 }.map {
            (String($0), .int(Int64(deferredByHour[$0])))
          })
      ),
    ]
    if let badges {
      fields.append(
        (
          "badges",
          .object(
            badges.counts.indices.map {
              (BadgeHistogram.labels[$0], .int(Int64(badges.counts[$0])))
            })
        ))
    }
    if users {
      fields.append(
        (
          "pairs_list",
          .array(
            pairList.map { pair in
              .object(
                [
                  ("user", .string(pair.user)), ("deliver", .bool(pair.outcome.isDelivered)),
                  pair.outcome.isDelivered
                    ? ("trigger", .string(pair.outcome.name))
                    : ("reason", .string(pair.outcome.name)),
                ] + (pair.deliverAt.map { [("deliver_at", JSONValue.int($0))] } ?? []))
            })
        ))
    }
    return .object(fields)
  }
}
