import FanoutIndex
import FanoutModel

/// A JSON document built in memory and written with fixed key order, for the
/// `--json` output of `fanout explain` and `fanout prefs get`.
public indirect enum JSONValue: Sendable, Equatable {
  case null
  case bool(Bool)
  case int(Int64)
  case string(String)
  case array([JSONValue])
  case object([(String, JSONValue)])

  public static func == (a: JSONValue, b: JSONValue) -> Bool { a.rendered() == b.rendered() }

  static func optional(_ s: String?) -> JSONValue { s.map(JSONValue.string) ?? .null }
  static func optional(_ i: Int64?) -> JSONValue { i.map(JSONValue.int) ?? .null }

  var isScalar: Bool {
    switch self {
    case .array, .object: false
    default: true
    }
  }

  /// Two-space indented, one key per line; ends without a newline.
  public func rendered(indent: String = "") -> String {
    let inner = indent + "  "
    switch self {
    case .null: return "null"
    case .bool(let b): return b ? "true" : "false"
    case .int(let i): return String(i)
    case .string(let s): return String(decoding: JSONText.quoted(s), as: UTF8.self)
    case .array(let items):
      if items.isEmpty { return "[]" }
      return "[\n" + items.map { inner + $0.rendered(indent: inner) }.joined(separator: ",\n")
        + "\n\(indent)]"
    case .object(let fields):
      if fields.isEmpty { return "{}" }
      if fields.allSatisfy({ $0.1.isScalar }) {  // small records stay on one line
        return "{"
          + fields.map { JSONValue.string($0.0).rendered() + ": " + $0.1.rendered() }
          .joined(separator: ", ") + "}"
      }
      return "{\n"
        + fields.map {
          inner + JSONValue.string($0.0).rendered() + ": " + $0.1.rendered(indent: inner)
        }.joined(separator: ",\n") + "\n\(indent)}"
    }
  }
}
