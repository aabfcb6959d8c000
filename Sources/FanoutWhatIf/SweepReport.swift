import FanoutKernel
import FanoutModel
import FanoutReport

/// A sweep's results: per variant, in the order given, its comparison with
/// A — each exactly the report a `fanout whatif` of that variant alone makes.
public struct SweepReport: Sendable {
  public var variants: [(name: String, report: WhatIfReport)]
  /// Wall-clock seconds per phase, as for one `whatif`.
  public var phases: [(phase: String, seconds: Double)] = []

  public init(variants: [(name: String, report: WhatIfReport)]) { self.variants = variants }

  /// "3 variants against A: from 120 fewer delivered pairs (tight) to 40
  /// more (loose)".
  public var headline: String {
    let changes = variants.map {
      ($0.name, $0.report.sides[1].delivered - $0.report.sides[0].delivered)
    }
    guard let low = changes.min(by: { $0.1 < $1.1 }), let high = changes.max(by: { $0.1 < $1.1 })
    else { return "no variant" }
    func words(_ change: Int) -> String {
      change == 0
        ? "as many delivered pairs"
        : "\(Format.grouped(abs(change))) \(change > 0 ? "more" : "fewer") delivered pairs"
    }
    return "\(variants.count) variants against A: from \(words(low.1)) (\(low.0)) to "
      + "\(words(high.1)) (\(high.0))"
  }

  /// `report.json`: the messages and rejected lines, then each variant's
  /// report (as `fanout whatif` writes it) under its name, in order.
  public func json() -> [UInt8] {
    let first = variants[0].report
    let document = JSONValue.object([
      ("messages", .int(Int64(first.messages))), ("rejected", .int(Int64(first.rejected))),
      (
        "variants",
        .array(
          variants.map { name, report in
            .object([("name", .string(name)), ("report", report.document)])
          })
      ),
    ])
    return Array((document.rendered(.table(at: 3)) + "\n").utf8)
  }

  /// `report.html`: the variants side by side, a row each, then each
  /// variant's own section.
  public func html() -> [UInt8] {
    let a = variants[0].report.sides[0]
    var page = "<h1>\(HTML.escape(headline))</h1>"
    page +=
      "<p><b>A</b> = <code>\(HTML.escape(a.snapshot))</code>; traffic <code>"
      + "\(HTML.escape(variants[0].report.traffic))</code>, "
      + "\(Format.grouped(variants[0].report.messages)) messages · \(HTML.escape(fanoutVersion))</p>"
    page +=
      #"<p class="muted">Beside this page: <a href="report.json">report.json</a> "#
      + "(every number, per variant), and per variant "
      + "<code>changes-NAME.ndjson.lz4</code> (each pair whose outcome changed against A).</p>"
    let reasons = Reason.allCases.filter { r in
      variants.contains { v in v.report.sides.contains { $0.suppressed[Int(r.rawValue)] > 0 } }
    }
    func tenths(_ t: Int) -> String { "\(Format.grouped(t / 10)).\(t % 10)" }
    let budget = variants[0].report.budget
    let headers =
      ["variant", "delivered", "change", "deferred", "pairs changed", "users affected"]
      + reasons.map(\.name)
      + ["pushes/user/day p50", "p90", "over \(budget)/day"]
    var rows: [[String]] = []
    let first = variants[0].report
    rows.append(
      ["<b>A</b>", Format.grouped(a.delivered), "", Format.grouped(a.deferred), "", ""]
        + reasons.map { Format.grouped(a.suppressed[Int($0.rawValue)]) }
        + [
          tenths(first.pushesPerDay[0].p50Tenths), tenths(first.pushesPerDay[0].p90Tenths),
          Format.share(first.pushesPerDay[0].overBudget, of: first.pushesPerDay[0].users),
        ])
    for (name, report) in variants {
      let (x, y) = (report.sides[0], report.sides[1])
      let change = y.delivered - x.delivered
      let cls = ReportPage.Polarity.reach.cls(change)
      let pushes = report.pushesPerDay[1]
      rows.append(
        [
          ##"<a href="#\##(HTML.escape(name))"><code>\##(HTML.escape(name))</code></a>"##,
          Format.grouped(y.delivered),
          #"<span class="\#(cls)">\#(Format.signed(change)) (\#(Format.percent(from: x.delivered, to: y.delivered)))</span>"#,
          Format.grouped(y.deferred), Format.grouped(report.changedPairs),
          Format.grouped(report.usersAffected),
        ]
          + reasons.map { Format.grouped(y.suppressed[Int($0.rawValue)]) }
          + [
            tenths(pushes.p50Tenths), tenths(pushes.p90Tenths),
            Format.share(pushes.overBudget, of: pushes.users),
          ])
    }
    page += "<section><h2>Side by side</h2>" + ReportPage.grid(headers: headers, rows: rows)
    page +=
      #"<p class="muted">Suppressed pairs per reason; pushes are delivered pairs per user per day, "#
      + "among the users who get one on either side.</p></section>"
    for (name, report) in variants {
      page += #"<div class="variant-section">"# + report.body(variant: name) + "</div>"
    }
    return ReportPage.document(
      title: "What if, \(variants.count) variants: " + headline, body: page)
  }

  /// For the terminal: a line per variant.
  public var text: String {
    var lines = [headline]
    for (name, report) in variants {
      lines.append("  \(name): " + report.headline + ", \(report.usersAffected) users affected")
    }
    return lines.joined(separator: "\n") + "\n"
  }

  public var seconds: Double { phases.reduce(0) { $0 + $1.seconds } }
}
