/// A grouped bar chart, A beside B for each label, drawn as inline SVG.
public struct BarChart {
  static let colors = (a: "#98a2b3", b: "#2563eb")

  public var labels: [String]
  public var a: [Int]
  public var b: [Int]
  public var width = 920
  public var height = 260
  /// Label every `labelStep`-th group only (for dense axes such as hours).
  public var labelStep = 1
  /// The two series' names, in the legend and the bars' tooltips.
  public var names = (a: "A", b: "B")

  public init(
    labels: [String], a: [Int], b: [Int], width: Int = 920, labelStep: Int = 1,
    names: (a: String, b: String) = ("A", "B")
  ) {
    self.labels = labels
    self.a = a
    self.b = b
    self.width = width
    self.labelStep = labelStep
    self.names = names
  }

  public func svg(title: String) -> String {
    let frame = ChartFrame(width: width, height: height, bottom: 36.0)
    let (left, top, plotWidth, plotHeight) = (
      frame.left, frame.top, frame.plotWidth, frame.plotHeight
    )
    let top1 = Self.niceCeiling(max(a.max() ?? 0, b.max() ?? 0, 1))
    let groupWidth = plotWidth / Double(max(labels.count, 1))
    let barWidth = max(1, groupWidth * 0.38)
    func y(_ v: Int) -> Double { top + plotHeight - plotHeight * Double(v) / Double(top1) }

    var s = frame.open(title: title)
    s += legend(right: Double(width) - frame.right, y: 8)
    for k in 0...4 {
      let v = top1 * k / 4
      let ty = y(v)
      s += frame.rule(at: ty, label: Format.compact(v), class: "grid")
    }
    for (i, label) in labels.enumerated() {
      let x0 = left + groupWidth * Double(i) + groupWidth * 0.1
      for (offset, value, color, side) in [
        (0.0, a[i], Self.colors.a, names.a), (barWidth, b[i], Self.colors.b, names.b),
      ] {
        let h = max(0, y(0) - y(value))
        s +=
          #"<rect x="\#(x0 + offset)" y="\#(y(value))" width="\#(barWidth)" height="\#(h)" fill="\#(color)">"#
        s += "<title>\(HTML.escape(label)) · \(side): \(Format.grouped(value))</title></rect>"
      }
      if i % labelStep == 0 {
        s += frame.groupLabel(label, at: x0 + barWidth)
      }
    }
    s += frame.rule(at: y(0), label: nil, class: "axis")
    return s + "</svg>"
  }

  /// The two swatches and names, ending at `right` (about 7 px a character).
  private func legend(right: Double, y: Double) -> String {
    var s = ""
    let widths = [names.a, names.b].map { 17 + 7 * Double($0.count) + 16 }
    var lx = right - widths.reduce(0, +)
    for (k, (name, color)) in [(names.a, Self.colors.a), (names.b, Self.colors.b)].enumerated() {
      defer { lx += widths[k] }
      s += #"<rect x="\#(lx)" y="\#(y)" width="12" height="12" fill="\#(color)"/>"#
      s += #"<text x="\#(lx + 17)" y="\#(y + 11)" class="tick">\#(HTML.escape(name))</text>"#
    }
    return s
  }

  /// The smallest 1, 2 or 5 × 10ⁿ that is at least `v`, times 4 ticks' worth.
  static func niceCeiling(_ v: Int) -> Int {
    var step = 1
    while true {
      for m in [1, 2, 5] where m * step * 4 >= v { return m * step * 4 }
      step *= 10
    }
  }
}

/// B − A for each label, bars up from a zero line when B is higher and down
/// when lower, drawn as inline SVG: a change of a few percent, invisible
/// between two tall A and B bars, shows at full height. For counts of
/// delivered pairs: blue where more reach people, amber where fewer.
public struct DeltaChart {
  public var labels: [String]
  public var a: [Int]
  public var b: [Int]
  public var width = 920
  public var height = 200
  public var labelStep = 1

  public init(labels: [String], a: [Int], b: [Int], labelStep: Int = 1) {
    self.labels = labels
    self.a = a
    self.b = b
    self.labelStep = labelStep
  }

  public func svg(title: String) -> String {
    let frame = ChartFrame(width: width, height: height, bottom: 30.0)
    let (left, top, plotWidth, plotHeight) = (
      frame.left, frame.top, frame.plotWidth, frame.plotHeight
    )
    let deltas = zip(a, b).map { $1 - $0 }
    let reach = BarChart.niceCeiling(max(deltas.map { abs($0) }.max() ?? 0, 1))
    let groupWidth = plotWidth / Double(max(labels.count, 1))
    func y(_ v: Int) -> Double { top + plotHeight / 2 - plotHeight / 2 * Double(v) / Double(reach) }

    var s = frame.open(title: title)
    for v in [-reach, -reach / 2, 0, reach / 2, reach] {
      s += frame.rule(
        at: y(v), label: (v > 0 ? "+" : "") + Format.compact(v), class: v == 0 ? "axis" : "grid")
    }
    if deltas.allSatisfy({ $0 == 0 }) {
      s +=
        #"<text x="\#(left + plotWidth / 2)" y="\#(y(0) - 8)" text-anchor="middle" class="tick no-change">no change</text>"#
    }
    for (i, label) in labels.enumerated() {
      let d = deltas[i]
      let x = left + groupWidth * Double(i) + groupWidth * 0.15
      let y0 = min(y(0), y(d))
      let h = abs(y(d) - y(0))
      s +=
        #"<rect x="\#(x)" y="\#(y0)" width="\#(groupWidth * 0.7)" height="\#(h)" fill="\#(d >= 0 ? "#2563eb" : "#d97706")">"#
      s += "<title>\(HTML.escape(label)) · B − A: \(Format.signed(d))</title></rect>"
      if i % labelStep == 0 {
        s += frame.groupLabel(label, at: x + groupWidth * 0.35)
      }
    }
    return s + "</svg>"
  }
}

/// The frame both charts draw in: the SVG element with its title, the
/// margins around the plot, the value rules and the group labels.
struct ChartFrame {
  let width: Int
  let height: Int
  let left = 64.0
  let right = 12.0
  let top = 28.0
  let bottom: Double

  var plotWidth: Double { Double(width) - left - right }
  var plotHeight: Double { Double(height) - top - bottom }

  /// The opening `<svg>` (scalable: the page's style fits it to the width) and the title.
  func open(title: String) -> String {
    #"<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 \#(width) \#(height)" width="\#(width)" height="\#(height)" role="img" aria-label="\#(HTML.escape(title))">"#
      + #"<text x="\#(left)" y="16" class="chart-title">\#(HTML.escape(title))</text>"#
  }

  /// A horizontal rule across the plot at `y`, with its value on the left.
  func rule(at y: Double, label: String?, class cls: String) -> String {
    #"<line x1="\#(left)" x2="\#(Double(width) - right)" y1="\#(y)" y2="\#(y)" class="\#(cls)"/>"#
      + (label.map {
        #"<text x="\#(left - 6)" y="\#(y + 4)" text-anchor="end" class="tick">\#(HTML.escape($0))</text>"#
      } ?? "")
  }

  /// A group's label under the plot, centred on `x`.
  func groupLabel(_ label: String, at x: Double) -> String {
    #"<text x="\#(x)" y="\#(Double(height) - bottom + 16)" text-anchor="middle" class="tick">\#(HTML.escape(label))</text>"#
  }
}
