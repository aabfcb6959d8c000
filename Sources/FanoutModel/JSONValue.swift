/// A JSON document built in memory and written with its keys in the order
/// given: Fanout's one writer of ordered JSON for documents people read
/// (`summary.json`, what-if's and audit's `report.json` and `audit.json`,
/// the stage's JSON log, metrics and batch records, and the `--json`
/// output of `fanout explain` and `fanout prefs get`). The byte-level hot paths (delivery lines, decision
/// lines) write their bytes directly instead.
public indirect enum JSONValue: Sendable, Equatable {
  case null
  case bool(Bool)
  case int(Int64)
  /// A number already written (seconds to the microsecond).
  case number(String)
  case string(String)
  case array([JSONValue])
  case object([(String, JSONValue)])

  public static func == (a: JSONValue, b: JSONValue) -> Bool { a.rendered() == b.rendered() }

  public static func optional(_ s: String?) -> JSONValue { s.map(JSONValue.string) ?? .null }
  public static func optional(_ i: Int64?) -> JSONValue { i.map(JSONValue.int) ?? .null }

  public var isScalar: Bool {
    switch self {
    case .array, .object: false
    default: true
    }
  }

  /// The text, two-space indented where `layout` puts a container on
  /// lines of its own (one key or item per line); ends without a newline.
  public func rendered(_ layout: JSONLayout = .outline) -> String {
    rendered(layout, indent: "", depth: 0)
  }

  private func rendered(_ layout: JSONLayout, indent: String, depth: Int) -> String {
    let inner = indent + "  "
    let (comma, colon) = layout.spaced ? (", ", ": ") : (",", ":")
    switch self {
    case .null: return "null"
    case .bool(let b): return b ? "true" : "false"
    case .int(let i): return String(i)
    case .number(let n): return n
    case .string(let s): return String(decoding: JSONText.quoted(s), as: UTF8.self)
    case .array(let items):
      if items.isEmpty { return "[]" }
      guard layout.breaks(self, depth: depth) else {
        return "["
          + items.map { $0.rendered(layout, indent: indent, depth: depth + 1) }
          .joined(separator: comma) + "]"
      }
      return "[\n"
        + items.map { inner + $0.rendered(layout, indent: inner, depth: depth + 1) }.joined(
          separator: ",\n")
        + "\n\(indent)]"
    case .object(let fields):
      if fields.isEmpty { return "{}" }
      guard layout.breaks(self, depth: depth) else {
        return "{"
          + fields.map {
            JSONValue.string($0.0).rendered() + colon
              + $0.1.rendered(layout, indent: indent, depth: depth + 1)
          }.joined(separator: comma) + "}"
      }
      return "{\n"
        + fields.map {
          inner + JSONValue.string($0.0).rendered() + ": "
            + $0.1.rendered(layout, indent: inner, depth: depth + 1)
        }.joined(separator: ",\n") + "\n\(indent)}"
    }
  }
}

/// Which containers of a `JSONValue` go on lines of their own: the rest
/// stay on one line. Depths count from the top value (0).
public struct JSONLayout: Sendable {
  /// Containers this deep or deeper stay on one line.
  public let lineDepth: Int
  /// Objects deeper than this stay on one line (a table's rows): below
  /// it, only arrays of containers go on lines of their own.
  public let objectDepth: Int
  /// Whether an array of scalars goes on lines of its own too.
  public let listsOnLines: Bool
  /// Separators on one line: ", " and ": ", or "," and ":".
  public let spaced: Bool

  /// Every container holding another on lines of its own, lists too
  /// (`fanout explain --json`, `fanout prefs get --json`).
  public static let outline = JSONLayout(
    lineDepth: .max, objectDepth: .max, listsOnLines: true, spaced: true)
  /// A key per line, each value on its line (`summary.json`).
  public static let keyPerLine = JSONLayout(
    lineDepth: 1, objectDepth: 0, listsOnLines: false, spaced: true)
  /// All on one line, compact (log lines, metrics, batch records).
  public static let line = JSONLayout(
    lineDepth: 0, objectDepth: 0, listsOnLines: false, spaced: false)
  /// A key per line, and tables (arrays of containers) a row per line, each
  /// compact (`report.json`, `audit.json`).
  public static let table = table(at: 0)

  /// `table` for documents `depth` levels down (a sweep's reports): the
  /// objects above them and theirs on lines of their own.
  public static func table(at depth: Int) -> JSONLayout {
    JSONLayout(lineDepth: depth + 2, objectDepth: depth, listsOnLines: false, spaced: false)
  }

  func breaks(_ value: JSONValue, depth: Int) -> Bool {
    guard depth < lineDepth else { return false }
    switch value {
    case .array(let items):
      return listsOnLines || !items.allSatisfy(\.isScalar)
    case .object(let fields):
      return depth <= objectDepth && !fields.allSatisfy { $0.1.isScalar }
    default: return false
    }
  }
}
