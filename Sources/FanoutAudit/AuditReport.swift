import FanoutModel
import FanoutReport

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
  /// Deliveries the rules make and pushes sent, per UTC hour of the
  /// message's ts (pushes for unknown messages left out).
  public var expectedByHour = [Int](repeating: 0, count: 24)
  public var sentByHour = [Int](repeating: 0, count: 24)
  /// The first few findings of each kind, for the page.
  public var examples = [[Example]](repeating: [], count: FindingKind.allCases.count)
  public static let examplesPerKind = 5

  public struct Example: Sendable {
    public var message: String
    public var user: String
    public var gateway: String?
    public var reason: String?
    public var explain: String?
  }

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

  mutating func expect(gateway: Int, hour: Int) {
    expected += 1
    expectedByHour[hour] += 1
    gatewayCounts[gateway].expected += 1
  }

  /// A push to a device of gateway row `gateway`.
  mutating func countSent(gateway: Int, hour: Int) {
    sent += 1
    sentByHour[hour] += 1
    gatewayCounts[gateway].sent += 1
  }

  mutating func countSent(gateway: GatewayKey, hour: Int?) {
    sent += 1
    if let hour { sentByHour[hour] += 1 }
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
      var part = "\(Format.grouped(t.count(kind))) \(kind.name.replacingUnderscores)"
      if kind == .spurious {
        let top = SpuriousReason.all.filter { t.spurious[$0.slot] > 0 }
          .sorted { t.spurious[$0.slot] > t.spurious[$1.slot] }.prefix(3)
        part +=
          " ("
          + top.map { "\($0.name) \(Format.grouped(t.spurious[$0.slot]))" }
          .joined(separator: ", ") + ")"
      }
      parts.append(part)
    }
    let share =
      "\(percent(t.agreementPPM)) of deliveries agree (\(Format.grouped(t.agree)) of "
      + "\(Format.grouped(t.expected + t.unmatched)))"
    return share + (parts.isEmpty ? "; no findings" : "; " + parts.joined(separator: ", "))
  }

  /// `audit.json`: fixed key order, no timings (the same inputs give the
  /// same bytes).
  public func json() -> [UInt8] {
    func int(_ i: Int) -> JSONValue { .int(Int64(i)) }
    func kinds(_ counts: [Int]) -> JSONValue {
      .object(FindingKind.allCases.map { ($0.name, int(counts[$0.rawValue])) })
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
    let document = JSONValue.object([
      ("messages", int(messages)), ("reads", int(reads)), ("rejected", int(rejected)),
      (
        "log",
        .object([
          ("files", .array(logFiles.map { .string($0) })), ("lines", int(logLines)),
          ("pushes", int(t.sent)), ("unreadable", int(unreadable)),
          ("order", .string(sortedAt == nil ? "traffic" : "sorted")),
        ])
      ),
      ("tolerance_ms", .int(Int64(toleranceMs))), ("expected", int(t.expected)),
      ("agree", int(t.agree)), ("agreement", .number(fraction)), ("findings", kinds(t.findings)),
      ("spurious", .object(SpuriousReason.all.map { ($0.name, int(t.spurious[$0.slot])) })),
      (
        "wrong_device",
        .object(WrongDeviceReason.allCases.map { ($0.name, int(t.wrongDevice[$0.rawValue])) })
      ),
      (
        "gateways",
        .object(
          gateways.map { name, c in
            (
              name,
              .object([
                ("expected", int(c.expected)), ("sent", int(c.sent)),
                ("findings", kinds(c.findings)),
              ])
            )
          })
      ),
      ("hours_utc", .object(hours.map { (String($0), kinds(t.hours[$0])) })),
      ("headline", .string(headline)),
    ])
    return Array((document.rendered(.table) + "\n").utf8)
  }

  /// For the terminal: the headline, then the counts.
  public var text: String {
    let t = tally
    var out = [headline, ""]
    out.append(
      "traffic: \(Format.grouped(messages)) messages, \(Format.grouped(reads)) reads, "
        + "\(Format.grouped(rejected)) rejected lines")
    out.append(
      "sent log: \(Format.grouped(logLines)) lines in \(counted(logFiles.count, "file")), "
        + "\(Format.grouped(t.sent)) pushes, \(Format.grouped(unreadable)) unreadable lines"
        + (sortedAt.map { " (not in traffic order from \($0): sorted first)" } ?? ""))
    out.append(
      "deliveries the rules make: \(Format.grouped(t.expected)); sent once and on time: \(Format.grouped(t.agree))"
    )
    for kind in FindingKind.allCases {
      out.append("  \(kind.name): \(Format.grouped(t.count(kind)))")
    }
    return out.joined(separator: "\n") + "\n"
  }
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

extension FindingKind {
  /// What the kind means, in one line, for the page.
  public var definition: String {
    switch self {
    case .missed: "the rules deliver to this device; nothing was sent to it"
    case .spurious: "sent, but the rules suppress the pair"
    case .wrongDevice: "sent to a device the user does not have, or that the gateway gate blocks"
    case .duplicate: "sent to the same device again"
    case .early: "sent more than the tolerance before the pair's delivery time"
    case .late: "sent more than the tolerance after the pair's delivery time"
    case .unknownMessage: "sent for a message id that no traffic line has"
    }
  }
}

extension SpuriousReason {
  var definition: String {
    switch self {
    case .rule(let r): r.definition
    case .sender: "the user sent the message"
    case .notMember: "the user is not a member of the message's channel"
    case .unknownUser: "the snapshot has no such user"
    }
  }
}

extension AuditReport {
  /// `report.html`: the audit on one self-contained page, in the what-if
  /// page's style; the same bytes for the same inputs.
  public func html(snapshot: String, traffic: String) -> [UInt8] {
    let t = tally
    let hours = (0..<24).map(String.init)
    func n(_ v: Int) -> String { Format.grouped(v) }
    var page = "<h1>\(HTML.escape(headline))</h1>"
    page +=
      "<p>snapshot <code>\(HTML.escape(snapshot))</code>, traffic <code>"
      + "\(HTML.escape(traffic))</code> (\(n(messages)) messages, \(n(reads)) reads, "
      + "\(n(rejected)) lines rejected)</p>"
    page +=
      "<p>sent log: "
      + logFiles.map { "<code>\(HTML.escape($0))</code>" }
      .joined(separator: ", ")
      + " (\(n(logLines)) lines, \(n(t.sent)) pushes, \(n(unreadable)) unreadable"
      + (sortedAt.map {
        "; not in traffic order from <code>\(HTML.escape($0))</code>, sorted first"
      }
        ?? "") + ")</p>"
    page +=
      #"<p class="muted">Tolerance \#(n(Int(toleranceMs))) ms · \#(HTML.escape(fanoutVersion)) · "#
      + #"beside this page: <a href="audit.json">audit.json</a> (every number), "#
      + #"<a href="findings.ndjson.lz4">findings.ndjson.lz4</a> (one line per finding, with "#
      + #"its <code>fanout explain</code> command), <a href="unreadable.ndjson">unreadable.ndjson</a>, "#
      + #"<a href="rejected.ndjson">rejected.ndjson</a>.</p>"#
    page += #"<section class="cards">"#
    page += ReportPage.card(
      label: "Deliveries the rules make", value: n(t.expected), note: "pair × device")
    page += ReportPage.card(label: "Pushes sent", value: n(t.sent), note: "in the log")
    page += ReportPage.card(
      label: "Agree", value: percent(t.agreementPPM),
      note: "\(n(t.agree)) sent once, on time")
    for kind in FindingKind.allCases {
      page += ReportPage.card(label: kind.name, value: n(t.count(kind)), note: kind.definition)
    }
    page += "</section>"
    page += "<section><h2>By hour of the message</h2>"
    page +=
      BarChart(
        labels: hours, a: t.expectedByHour, b: t.sentByHour, labelStep: 2,
        names: ("the rules", "sent")
      ).svg(title: "Deliveries the rules make and pushes sent, by UTC hour")
    if t.hours.contains(where: { $0.contains { $0 > 0 } }) {
      page +=
        BarChart(
          labels: hours, a: t.hours.map { $0[FindingKind.missed.rawValue] },
          b: t.hours.map { $0.reduce(0, +) - $0[FindingKind.missed.rawValue] }, labelStep: 2,
          names: ("missed", "sent wrongly")
        ).svg(title: "Findings by UTC hour: missed, and sent wrongly (every other kind)")
    }
    page += "</section>"
    page += "<section><h2>Findings</h2>"
    page += ReportPage.grid(
      headers: ["kind", "findings"],
      rows: FindingKind.allCases.map {
        [
          "<code>\($0.name)</code>" + #"<div class="def">\#(HTML.escape($0.definition))</div>"#,
          n(t.count($0)),
        ]
      })
    page += "</section>"
    let reasons = SpuriousReason.all.filter { t.spurious[$0.slot] > 0 }
    page += "<section><h2>Spurious pushes by reason</h2>"
    page += ReportPage.grid(
      headers: ["reason", "pushes"],
      rows: reasons.map {
        [
          "<code>\($0.name)</code>" + #"<div class="def">\#(HTML.escape($0.definition))</div>"#,
          n(t.spurious[$0.slot]),
        ]
      })
    page += "</section>"
    page += "<section><h2>By gateway</h2>"
    var gateways: [(String, AuditTally.GatewayCounts)] = gatewayNames.indices.compactMap {
      let c = t.gatewayCounts[$0]
      return c.expected + c.sent > 0 ? (gatewayNames[$0], c) : nil
    }
    gateways += t.otherGateways.map { ($0.key, $0.value) }
    gateways.sort { $0.0.utf8.lexicographicallyPrecedes($1.0.utf8) }
    page += ReportPage.grid(
      headers: ["gateway", "the rules", "sent"] + FindingKind.allCases.map(\.name),
      rows: gateways.map { name, c in
        [
          "<code>\(HTML.escape(name.isEmpty ? "(none named)" : name))</code>", n(c.expected),
          n(c.sent),
        ]
          + c.findings.map(n)
      })
    page += "</section>"
    page += "<section><h2>Examples</h2>"
    var examples: [[String]] = []
    for kind in FindingKind.allCases {
      for e in t.examples[kind.rawValue] {
        examples.append([
          "<code>\(kind.name)</code>", "<code>\(HTML.escape(e.message))</code>",
          "<code>\(HTML.escape(e.user))</code>", HTML.escape(e.gateway ?? ""),
          HTML.escape(e.reason ?? ""), e.explain.map { "<code>\(HTML.escape($0))</code>" } ?? "",
        ])
      }
    }
    page += ReportPage.grid(
      headers: ["kind", "message", "user", "gateway", "reason", "see why"], rows: examples)
    page +=
      #"<p class="muted">The first \#(AuditTally.examplesPerKind) findings of each kind, in traffic order.</p>"#
    page += "</section>"
    page +=
      "<footer>Written by <code>\(HTML.escape(fanoutVersion))</code> (<code>fanout audit</code>); "
      + #"the numbers are in <a href="audit.json">audit.json</a>.</footer>"#
    return ReportPage.document(title: "Audit: " + headline, body: page)
  }
}
