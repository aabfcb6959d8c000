/// The page every report is: one document, one style, cards and tables.
public enum ReportPage {
  /// A whole page: `title` in the tab, `body` inside `<main>`.
  public static func document(title: String, body: String) -> [UInt8] {
    Array(
      """
      <!DOCTYPE html>
      <html lang="en"><head><meta charset="utf-8">
      <meta name="viewport" content="width=device-width, initial-scale=1">
      <title>\(HTML.escape(title))</title>
      <style>\(css)</style></head><body><main>
      \(body)
      </main></body></html>

      """.utf8)
  }

  /// What more of a count means for the people who get the pushes: more
  /// reach, or more held back. Colours follow that, not the sign.
  public enum Polarity: Sendable {
    case reach
    case suppression

    public func cls(_ change: Int) -> String {
      if change == 0 { return "same" }
      return (change > 0) == (self == .reach) ? "more" : "fewer"
    }
  }

  public static func card(_ label: String, _ a: Int, _ b: Int, _ polarity: Polarity) -> String {
    #"<div class="card"><div class="label">\#(label)</div>"#
      + #"<div class="value"><span>\#(Format.grouped(a))</span> <span>→ \#(Format.grouped(b))</span></div>"#
      + #"<div class="delta \#(polarity.cls(b - a))">\#(Format.signed(b - a)) (\#(Format.percent(from: a, to: b)))</div></div>"#
  }

  /// A card with one figure.
  public static func card(label: String, value: String, note: String) -> String {
    #"<div class="card"><div class="label">\#(HTML.escape(label))</div>"#
      + #"<div class="value">\#(HTML.escape(value))</div>"#
      + #"<div class="delta">\#(HTML.escape(note))</div></div>"#
  }

  /// A plain table: `headers`, then rows of cells already written as HTML
  /// (escape text with `HTML.escape`); numbers right-aligned by the style.
  public static func grid(headers: [String], rows: [[String]]) -> String {
    guard !rows.isEmpty else { return #"<p class="muted">None.</p>"# }
    var s = #"<div class="scroll"><table class="numbers"><thead><tr>"#
    for h in headers { s += "<th>\(HTML.escape(h))</th>" }
    s += "</tr></thead><tbody>"
    for row in rows { s += "<tr>" + row.map { "<td>\($0)</td>" }.joined() + "</tr>" }
    return s + "</tbody></table></div>"
  }

  /// A table of A, B and the change, with a bar for each change.
  public static func table(
    header: String, rows: [(String, Int, Int)], code: Bool = false,
    polarity: Polarity = .reach, definitions: [String]? = nil
  ) -> String {
    guard !rows.isEmpty else { return #"<p class="muted">No change.</p>"# }
    let widest = max(rows.map { abs($0.2 - $0.1) }.max() ?? 0, 1)
    var s =
      #"<div class="scroll"><table class="numbers"><thead><tr><th>\#(header)</th><th>A</th><th>B</th><th>change</th><th></th></tr></thead><tbody>"#
    for (k, (name, a, b)) in rows.enumerated() {
      let change = b - a
      let width = Int((Double(abs(change)) / Double(widest) * 96).rounded())
      var label = code ? "<code>\(HTML.escape(name))</code>" : HTML.escape(name)
      if let definitions { label += #"<div class="def">\#(HTML.escape(definitions[k]))</div>"# }
      let cls = polarity.cls(change)
      s += "<tr><td>\(label)</td><td>\(Format.grouped(a))</td><td>\(Format.grouped(b))</td>"
      s += #"<td class="\#(cls)">\#(Format.signed(change))</td>"#
      s += #"<td><span class="bar \#(cls)" style="width:\#(width)px"></span></td></tr>"#
    }
    return s + "</tbody></table></div>"
  }

  static let css = """
    body{margin:0;background:#f6f7f9;color:#1f2937;font:15px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif}
    main{max-width:1120px;margin:0 auto;padding:24px}
    h1{font-size:26px;line-height:1.25;margin:0 0 8px;overflow-wrap:anywhere}h2{font-size:18px;margin:0 0 10px}
    section{background:#fff;border:1px solid #e5e7eb;border-radius:10px;padding:16px 18px;margin:16px 0;min-width:0}
    section.cards{display:grid;grid-template-columns:repeat(auto-fit,minmax(160px,1fr));gap:12px;background:none;border:0;padding:0}
    section.pair{display:grid;grid-template-columns:repeat(auto-fit,minmax(300px,1fr));gap:20px}
    section.pair>div{min-width:0}
    svg{display:block;max-width:100%;height:auto}
    .scroll{overflow-x:auto;max-width:100%}
    .card{background:#fff;border:1px solid #e5e7eb;border-radius:10px;padding:12px 14px;min-width:0}
    .card .label{color:#6b7280;font-size:13px}.card .value{font-size:19px;font-weight:600;margin:4px 0}
    .card .value span{white-space:nowrap}
    .more{color:#1d4ed8}.fewer{color:#b45309}.same{color:#6b7280}
    .def{color:#6b7280;font-size:12px;max-width:360px}
    a{color:#1d4ed8}
    .muted{color:#6b7280;font-size:13px}
    pre{background:#f3f4f6;border-radius:6px;padding:8px 10px;white-space:pre-wrap;overflow-wrap:anywhere;font-size:13px}
    code{font-size:13px;overflow-wrap:anywhere}
    @media (max-width:520px){main{padding:12px}h1{font-size:21px}section{padding:12px}.numbers td,.numbers th{padding:3px 6px}}
    table{border-collapse:collapse;font-variant-numeric:tabular-nums}
    .numbers td,.numbers th{padding:4px 10px;text-align:right;border-bottom:1px solid #f0f1f3}
    .numbers td:first-child,.numbers th:first-child{text-align:left}
    .numbers td:last-child{text-align:left}
    .bar{display:inline-block;height:10px;border-radius:2px;vertical-align:middle}
    .bar.more{background:#2563eb}.bar.fewer{background:#d97706}
    .matrix th,.matrix td{padding:6px 9px;text-align:right;border:1px solid #eef0f3;font-size:13px}
    .matrix thead th{background:#f9fafb;font-weight:600}
    .matrix .rowhead{text-align:left;background:#f9fafb}
    .matrix .corner{color:#6b7280;font-weight:400}
    .matrix td.big{outline:2px solid #9a3412;outline-offset:-2px;font-weight:700}
    svg .chart-title{font-size:13px;fill:#374151;font-weight:600}
    svg .tick{font-size:11px;fill:#6b7280}
    svg .grid{stroke:#eef0f3}svg .axis{stroke:#9ca3af}
    footer{color:#9ca3af;font-size:12px;margin-top:20px}
    """
}
