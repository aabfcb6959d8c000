import FanoutModel

/// The audit's counts: what was expected and sent, and the findings by
/// kind, reason, gateway and hour.
public struct AuditTally: Sendable {
  /// Deliveries the rules make (pair × device), and those sent once, on time.
  public var expected = 0
  public var agree = 0
  public var sent = 0
  public var findings = [Int](repeating: 0, count: FindingKind.allCases.count)
  /// Spurious pushes per reason: the rules' reasons in rule order, then
  /// sender, not_member, unknown_user.
  public var spurious = [Int](repeating: 0, count: SpuriousReason.all.count)
  public var wrongDevice = [Int](repeating: 0, count: WrongDeviceReason.allCases.count)
  /// Per gateway row: expected, sent, and findings per kind; gateways the
  /// snapshot does not have, by the name the log gave.
  var gatewayCounts: [GatewayCounts]
  var otherGateways: [String: GatewayCounts] = [:]
  /// Findings per UTC hour of their message's ts, per kind.
  public var hours = [[Int]](
    repeating: [Int](repeating: 0, count: FindingKind.allCases.count), count: 24)

  struct GatewayCounts: Sendable {
    var expected = 0
    var sent = 0
    var findings = [Int](repeating: 0, count: FindingKind.allCases.count)
  }

  enum GatewayKey {
    case row(Int)
    case named(String)
  }

  init(gateways: Int) { gatewayCounts = [GatewayCounts](repeating: .init(), count: gateways) }

  mutating func expect(gateway: Int) {
    expected += 1
    gatewayCounts[gateway].expected += 1
  }

  mutating func countSent(gateway: GatewayKey) {
    sent += 1
    switch gateway {
    case .row(let g): gatewayCounts[g].sent += 1
    case .named(let name): otherGateways[name, default: .init()].sent += 1
    }
  }

  mutating func count(_ kind: FindingKind, gateway: GatewayKey, hour: Int?) {
    findings[kind.rawValue] += 1
    if let hour { hours[hour][kind.rawValue] += 1 }
    switch gateway {
    case .row(let g): gatewayCounts[g].findings[kind.rawValue] += 1
    case .named(let name): otherGateways[name, default: .init()].findings[kind.rawValue] += 1
    }
  }

  /// Pushes that match no delivery the rules make.
  public var unmatched: Int {
    findings[FindingKind.spurious.rawValue] + findings[FindingKind.wrongDevice.rawValue]
      + findings[FindingKind.duplicate.rawValue] + findings[FindingKind.unknownMessage.rawValue]
  }

  /// Agreement in millionths: deliveries sent once and on time, of every
  /// delivery the rules make plus every push that matches none.
  public var agreementPPM: Int {
    let whole = expected + unmatched
    return whole == 0 ? 1_000_000 : Int((Int64(agree) * 1_000_000) / Int64(whole))
  }

  public func count(_ kind: FindingKind) -> Int { findings[kind.rawValue] }
}

/// What `fanout audit` found, for the terminal and `audit.json`.
public struct AuditReport: Sendable {
  public var tally: AuditTally
  public var messages = 0
  public var reads = 0
  public var rejected = 0
  public var logFiles: [String] = []
  public var logLines = 0
  public var unreadable = 0
  /// Whether the logs were read in traffic order, or sorted first (and
  /// where the first push out of order was).
  public var sortedAt: String? = nil
  public var toleranceMs: Int64 = 0
  public var gatewayNames: [String] = []
  public var seconds = 0.0

  /// "99.2% of pushes agree (…); 310 missed, 1,204 spurious (dnd 1,204)".
  public var headline: String {
    let t = tally
    var parts: [String] = []
    for kind in FindingKind.allCases where t.count(kind) > 0 {
      var part = "\(grouped(t.count(kind))) \(kind.name.replacingUnderscores)"
      if kind == .spurious {
        let top = SpuriousReason.all.filter { t.spurious[$0.slot] > 0 }
          .sorted { t.spurious[$0.slot] > t.spurious[$1.slot] }.prefix(3)
        part +=
          " ("
          + top.map { "\($0.name) \(grouped(t.spurious[$0.slot]))" }
          .joined(separator: ", ") + ")"
      }
      parts.append(part)
    }
    let share =
      "\(percent(t.agreementPPM)) of deliveries agree (\(grouped(t.agree)) of "
      + "\(grouped(t.expected + t.unmatched)))"
    return share + (parts.isEmpty ? "; no findings" : "; " + parts.joined(separator: ", "))
  }

  /// `audit.json`: fixed key order, no timings (the same inputs give the
  /// same bytes).
  public func json() -> [UInt8] {
    func q(_ s: String) -> String { String(decoding: JSONText.quoted(s), as: UTF8.self) }
    func kinds(_ counts: [Int]) -> String {
      "{"
        + FindingKind.allCases.map { "\(q($0.name)):\(counts[$0.rawValue])" }
        .joined(separator: ",") + "}"
    }
    let t = tally
    var gateways: [(String, AuditTally.GatewayCounts)] = gatewayNames.indices.compactMap {
      let c = t.gatewayCounts[$0]
      return c.expected + c.sent > 0 ? (gatewayNames[$0], c) : nil
    }
    gateways += t.otherGateways.map { ($0.key, $0.value) }
    gateways.sort { $0.0.utf8.lexicographicallyPrecedes($1.0.utf8) }
    let hours = (0..<24).filter { t.hours[$0].contains { $0 > 0 } }
    let ppm = t.agreementPPM
    let fraction = "\(ppm / 1_000_000).\(String(ppm % 1_000_000 + 1_000_000).dropFirst())"
    var lines = [
      #"  "messages": \#(messages),"#,
      #"  "reads": \#(reads),"#,
      #"  "rejected": \#(rejected),"#,
      #"  "log": {"files": [\#(logFiles.map(q).joined(separator: ","))], "lines": \#(logLines), "#
        + #""pushes": \#(t.sent), "unreadable": \#(unreadable), "#
        + #""order": \#(sortedAt == nil ? #""traffic""# : #""sorted""#)},"#,
      #"  "tolerance_ms": \#(toleranceMs),"#,
      #"  "expected": \#(t.expected),"#,
      #"  "agree": \#(t.agree),"#,
      #"  "agreement": \#(fraction),"#,
      #"  "findings": \#(kinds(t.findings)),"#,
      #"  "spurious": {"#
        + SpuriousReason.all.map { "\(q($0.name)):\(t.spurious[$0.slot])" }.joined(separator: ",")
        + "},",
      #"  "wrong_device": {"#
        + WrongDeviceReason.allCases.map { "\(q($0.name)):\(t.wrongDevice[$0.rawValue])" }
        .joined(separator: ",") + "},",
      #"  "gateways": {"#
        + gateways.map { name, c in
          "\(q(name)):{\"expected\":\(c.expected),\"sent\":\(c.sent),\"findings\":\(kinds(c.findings))}"
        }.joined(separator: ",") + "},",
      #"  "hours_utc": {"#
        + hours.map { "\(q(String($0))):\(kinds(t.hours[$0]))" }
        .joined(separator: ",") + "},",
      #"  "headline": \#(q(headline))"#,
    ]
    lines[0] = "{\n" + lines[0]
    return Array((lines.joined(separator: "\n") + "\n}\n").utf8)
  }

  /// For the terminal: the headline, then the counts.
  public var text: String {
    let t = tally
    var out = [headline, ""]
    out.append(
      "traffic: \(grouped(messages)) messages, \(grouped(reads)) reads, "
        + "\(grouped(rejected)) rejected lines")
    out.append(
      "sent log: \(grouped(logLines)) lines in \(counted(logFiles.count, "file")), "
        + "\(grouped(t.sent)) pushes, \(grouped(unreadable)) unreadable lines"
        + (sortedAt.map { " (not in traffic order from \($0): sorted first)" } ?? ""))
    out.append(
      "deliveries the rules make: \(grouped(t.expected)); sent once and on time: \(grouped(t.agree))"
    )
    for kind in FindingKind.allCases {
      out.append("  \(kind.name): \(grouped(t.count(kind)))")
    }
    return out.joined(separator: "\n") + "\n"
  }
}

/// 1234567 as "1,234,567".
func grouped(_ n: Int) -> String {
  let digits = String(n.magnitude)
  var out = ""
  for (k, c) in digits.enumerated() {
    if k > 0 && (digits.count - k) % 3 == 0 { out.append(",") }
    out.append(c)
  }
  return (n < 0 ? "-" : "") + out
}

/// Millionths as a percentage with one decimal, never rounded up to 100%.
func percent(_ ppm: Int) -> String {
  let tenths = ppm / 1_000
  return "\(tenths / 10).\(tenths % 10)%"
}

extension String {
  fileprivate var replacingUnderscores: String {
    String(map { $0 == "_" ? " " : $0 })
  }
}
