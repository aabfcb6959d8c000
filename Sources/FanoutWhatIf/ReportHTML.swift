import FanoutKernel
import FanoutModel
import FanoutReport

extension WhatIfReport {
  /// `report.html`: one self-contained page (inline CSS and SVG, no scripts,
  /// no external fonts), the same bytes for the same inputs.
  public func html() -> [UInt8] {
    ReportPage.document(title: "What if: " + headline, body: body())
  }

  /// The page's content; under `name`, as one variant's section of a sweep
  /// (its headline a second-level heading, its files named for it).
  func body(variant name: String? = nil) -> String {
    let changesFile = name.map { "changes-\($0).ndjson.lz4" } ?? "changes.ndjson.lz4"
    let a = sides[0]
    let b = sides[1]
    let deliveriesA = byGateway[0].reduce(0) { $0 + $1.delivered }
    let deliveriesB = byGateway[1].reduce(0) { $0 + $1.delivered }
    let scenario =
      if let sql = b.sql {
        "<p><b>B</b> = A with this SQL applied:</p><pre>\(HTML.escape(sql))</pre>"
          + "<p class=\"muted\">It changed \(HTML.escape(b.rowsChangedWords ?? "")).</p>"
      } else {
        "<p><b>B</b> = <code>\(HTML.escape(b.snapshot))</code></p>"
      }
    var page = """
      \(name.map { #"<h2 class="variant" id="\#(HTML.escape($0))">\#(HTML.escape($0)): "# } ?? "<h1>")\
      \(HTML.escape(headline))\(name == nil ? "</h1>" : "</h2>")
      <p><b>A</b> = <code>\(HTML.escape(a.snapshot))</code></p>
      \(scenario)
      <p class="muted">traffic <code>\(HTML.escape(traffic))</code>: \(Format.grouped(messages)) messages evaluated\(rejected > 0 ? ", \(Format.grouped(rejected)) lines rejected" : "") · \
      \(Format.grouped(a.pairs)) pairs in A, \(Format.grouped(b.pairs)) in B · \(HTML.escape(fanoutVersion))</p>
      <p class="muted">Beside this page: <a href="report.json">report.json</a> (every number), \
      <a href="\(changesFile)">\(changesFile)</a> (each pair whose outcome changed), \
      <a href="rejected.ndjson">rejected.ndjson</a>. Colours follow what a change does to \
      people: <span class="more">blue</span>, more pushes reach them; \
      <span class="fewer">amber</span>, fewer.</p>
      <section class="cards">
      \(ReportPage.card("Delivered pairs", a.delivered, b.delivered, .reach))
      \(ReportPage.card("Deliveries (devices)", deliveriesA, deliveriesB, .reach))
      \(ReportPage.card("Suppressed pairs", a.pairs - a.delivered, b.pairs - b.delivered, .suppression))
      \(ReportPage.card("Deferred pairs", a.deferred, b.deferred, .suppression))
      <div class="card"><div class="label">Pairs whose outcome changed</div>\
      <div class="value">\(Format.grouped(changedPairs))</div>\
      <div class="delta">\(Format.share(changedPairs, of: max(a.pairs, b.pairs))) of all pairs</div></div>
      <div class="card"><div class="label">Users affected</div>\
      <div class="value">\(Format.grouped(usersAffected))</div>\
      <div class="delta">users with a pair whose outcome changed</div></div>
      </section>

      """
    let hours = (0..<24).map { String($0) }
    page += "<section><h2>Delivered pairs by hour of day</h2>"
    page +=
      BarChart(
        labels: hours, a: slices.byHourUTC(.a).map(\.delivered),
        b: slices.byHourUTC(.b).map(\.delivered), labelStep: 2
      ).svg(title: "UTC hour of the message")
    page +=
      DeltaChart(
        labels: hours, a: slices.byHourUTC(.a).map(\.delivered),
        b: slices.byHourUTC(.b).map(\.delivered), labelStep: 2
      ).svg(title: "B − A: delivered pairs by UTC hour of the message")
    page +=
      BarChart(
        labels: hours, a: slices.byDeliveryHourUTC(.a).map(\.delivered),
        b: slices.byDeliveryHourUTC(.b).map(\.delivered), labelStep: 2
      ).svg(title: "UTC hour of delivery (later than the message's when deferred)")
    page +=
      BarChart(
        labels: hours, a: slices.byHourLocal(.a).map(\.delivered),
        b: slices.byHourLocal(.b).map(\.delivered), labelStep: 2
      ).svg(title: "Hour in the recipient's own time zone")
    page += "</section>"

    page += pushesSection()
    page += "<section><h2>Where pairs went: A outcome → B outcome</h2>"
    page += #"<div class="scroll">"# + transitionTable() + "</div>"
    page += "</section>"

    if a.notifications != nil || b.notifications != nil {
      let none = WhatIfReport.Notifications(counters: .init(), badges: .init())
      let (x, y) = (a.notifications ?? none, b.notifications ?? none)
      page += "<section><h2>Notifications (groups, badges, reads)</h2>"
      page += ReportPage.table(
        header: "Notifications",
        rows: [
          ("hidden by the group caps", x.counters.hidden, y.counters.hidden),
          ("removed by a read", x.counters.removed, y.counters.removed),
          ("cancelled (read before due)", x.counters.cancelled, y.counters.cancelled),
          ("unread at the end", x.counters.unread, y.counters.unread),
        ])
      page += ReportPage.table(
        header: "Badge at delivery",
        rows: BadgeHistogram.labels.indices.map {
          (BadgeHistogram.labels[$0], x.badges.counts[$0], y.badges.counts[$0])
        })
      page += "</section>"
    }

    page += "<section><h2>Suppressed pairs by reason</h2>"
    page += ReportPage.table(
      header: "Reason",
      rows: Reason.allCases.map {
        (
          Outcome.suppressed($0).name, a.suppressed[Int($0.rawValue)],
          b.suppressed[Int($0.rawValue)]
        )
      }, polarity: .suppression, definitions: Reason.allCases.map(\.definition))
    page += "</section>"

    page += "<section><h2>Delivered pairs by channel size</h2>"
    page +=
      BarChart(
        labels: Slice.sizeBuckets, a: slices.bySize(.a).map(\.delivered),
        b: slices.bySize(.b).map(\.delivered)
      ).svg(title: "members in the channel")
    page += "</section>"
    page += #"<section class="pair"><div><h2>Deliveries by gateway</h2>"#
    page +=
      BarChart(
        labels: gateways, a: byGateway[0].map(\.delivered), b: byGateway[1].map(\.delivered),
        width: 450
      ).svg(title: "deliveries (one per device)")
    page += "</div><div><h2>Delivered pairs by channel kind</h2>"
    page += ReportPage.table(
      header: "Kind",
      rows: Scope.allCases.map {
        (
          $0.name, slices.byKind(.a)[Int($0.rawValue)].delivered,
          slices.byKind(.b)[Int($0.rawValue)].delivered
        )
      })
    page += "</div></section>"

    page += #"<section class="pair"><div><h2>Channels that change most</h2>"#
    page += ReportPage.table(
      header: "Channel", rows: topChannels.map { ($0.id, $0.a, $0.b) }, code: true,
      definitions: topChannels.map(exampleWords))
    page += "</div><div><h2>Users who change most</h2>"
    page += ReportPage.table(
      header: "User", rows: topUsers.map { ($0.id, $0.a, $0.b) }, code: true,
      definitions: topUsers.map(exampleWords))
    page +=
      #"</div></section><p class="muted">Delivered pairs per channel and per user, A and B.</p>"#
    page += """
      <footer>Counts are (message, recipient) pairs unless they say deliveries. \
      Written by <code>\(HTML.escape(fanoutVersion))</code> (<code>fanout whatif</code>); the numbers \
      are in <a href="report.json">report.json</a>.</footer>
      """
    return page
  }

  /// A top row's example in words: the message and the command that shows
  /// the pair under A (`--snapshot` B for B's side).
  private func exampleWords(_ change: Change) -> String {
    guard let e = change.example else { return "" }
    let message = e.message.map { "--id " + ShellWord.quoted($0) } ?? "(line \(e.line))"
    return "e.g. " + (e.message ?? "line \(e.line)") + ", user " + e.user
      + ": fanout explain --snapshot " + ShellWord.quoted(sides[0].snapshot) + " --messages "
      + ShellWord.quoted(traffic) + " " + message + " --user " + ShellWord.quoted(e.user)
  }

  /// Notification fatigue: delivered pairs per user per day on each side,
  /// and how many users are above the budget.
  private func pushesSection() -> String {
    func tenths(_ t: Int) -> String { "\(Format.grouped(t / 10)).\(t % 10)" }
    let (x, y) = (pushesPerDay[0], pushesPerDay[1])
    var s = "<section><h2>Pushes per user per day</h2>"
    s +=
      #"<div class="scroll"><table class="numbers"><thead><tr><th></th><th>A</th><th>B</th></tr></thead><tbody>"#
    for (label, a, b) in [
      ("median (p50)", x.p50Tenths, y.p50Tenths), ("p90", x.p90Tenths, y.p90Tenths),
      ("p99", x.p99Tenths, y.p99Tenths), ("most", x.maxTenths, y.maxTenths),
    ] {
      s += "<tr><td>\(label)</td><td>\(tenths(a))</td><td>\(tenths(b))</td></tr>"
    }
    let cls = ReportPage.Polarity.suppression.cls(y.overBudget - x.overBudget)
    s +=
      "<tr><td>users above \(budget) a day</td><td>\(Format.grouped(x.overBudget)) "
      + "(\(Format.share(x.overBudget, of: x.users)))</td><td class=\"\(cls == "more" ? "same" : cls)\">"
      + "\(Format.grouped(y.overBudget)) (\(Format.share(y.overBudget, of: y.users)))</td></tr>"
    s += "</tbody></table></div>"
    s +=
      #"<p class="muted">Delivered pairs (the pushes a person sees, whatever their devices) per user, "#
      + "over the \(days == 1 ? "day" : "\(days) days") the traffic spans, among the "
      + "\(Format.grouped(max(x.users, y.users))) users who get at least one on either side. "
      + "The budget is <code>--budget</code> (\(budget)).</p></section>"
    return s
  }

  /// The transition matrix, with only the outcomes that occur; cells are
  /// shaded by size, changed ones in orange, unchanged in grey.
  private func transitionTable() -> String {
    let outcomes = Outcome.allCases
    let used = outcomes.filter { o in
      outcomes.contains { transitions(from: o, to: $0) > 0 || transitions(from: $0, to: o) > 0 }
    }
    let changedMax =
      used.flatMap { r in used.filter { $0 != r }.map { transitions(from: r, to: $0) } }
      .max() ?? 0
    let sameMax = used.map { transitions(from: $0, to: $0) }.max() ?? 0
    var s = #"<table class="matrix"><thead><tr><th class="corner">A ↓ · B →</th>"#
    for o in used { s += "<th>\(o.name)</th>" }
    s += "</tr></thead><tbody>"
    for r in used {
      s += #"<tr><th class="rowhead">\#(r.name)</th>"#
      for c in used {
        let v = transitions(from: r, to: c)
        let top = r == c ? sameMax : changedMax
        let strength = v == 0 || top == 0 ? 0 : 0.12 + 0.88 * Self.shade(v, of: top)
        let rgb = r == c ? "100,116,139" : "234,88,12"
        let big = r != c && v > 0 && Double(v) >= Double(changedMax) * 0.25 ? #" class="big""# : ""
        s +=
          #"<td\#(big) style="background:rgba(\#(rgb),\#(Self.fixed2(strength)))">\#(v == 0 ? "·" : Format.grouped(v))</td>"#
      }
      s += "</tr>"
    }
    s += "</tbody></table>"
    s +=
      #"<p class="muted">Rows: the pair's outcome under A; columns: under B. Orange cells changed; the darker, the more pairs. Outlined: at least a quarter of the largest change. <code>not_member</code>: the user is a member of the channel in one snapshot only.</p>"#
    return s
  }

  /// 0...1 for 0...top; a fourth root, so that small but real changes stay
  /// visible beside big ones.
  private static func shade(_ v: Int, of top: Int) -> Double {
    (Double(v) / Double(top)).squareRoot().squareRoot()
  }

  private static func fixed2(_ x: Double) -> String {
    let h = Int((x * 100).rounded())
    return "\(h / 100).\(h % 100 < 10 ? "0" : "")\(h % 100)"
  }

}
