/// A JSON document built in memory and written with its keys in the order
/// given: Fanout's one writer of ordered JSON for documents people read
/// (`summary.json`, and the `--json` output of `fanout explain` and
/// `fanout prefs get`). The byte-level hot paths (delivery lines, decision
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

  /// Two-space indented, one key or item per line, but for containers of
  /// scalars and those `lineDepth` levels down or deeper, which stay on one
  /// line (`{"a": 1, "b": [2, 3]}`); ends without a newline.
  public func rendered(indent: String = "", lineDepth: Int = .max) -> String {
    let inner = indent + "  "
    let below = lineDepth &- 1
    switch self {
    case .null: return "null"
    case .bool(let b): return b ? "true" : "false"
    case .int(let i): return String(i)
    case .number(let n): return n
    case .string(let s): return String(decoding: JSONText.quoted(s), as: UTF8.self)
    case .array(let items):
      if items.isEmpty { return "[]" }
      if lineDepth <= 0 {
        return "[" + items.map { $0.rendered(lineDepth: 0) }.joined(separator: ", ") + "]"
      }
      return "[\n"
        + items.map { inner + $0.rendered(indent: inner, lineDepth: below) }.joined(
          separator: ",\n")
        + "\n\(indent)]"
    case .object(let fields):
      if fields.isEmpty { return "{}" }
      if lineDepth <= 0 || fields.allSatisfy({ $0.1.isScalar }) {  // small records stay on one line
        return "{"
          + fields.map { JSONValue.string($0.0).rendered() + ": " + $0.1.rendered(lineDepth: 0) }
          .joined(separator: ", ") + "}"
      }
      return "{\n"
        + fields.map {
          inner + JSONValue.string($0.0).rendered() + ": "
            + $0.1.rendered(indent: inner, lineDepth: below)
        }.joined(separator: ",\n") + "\n\(indent)}"
    }
  }
}
