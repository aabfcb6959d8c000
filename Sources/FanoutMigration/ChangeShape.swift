import FanoutModel
import FoundationEssentials

/// The shape of a format's request JSON: which fields each object may have,
/// and what holds objects. Checked before the request is decoded, so that a
/// misspelt field is refused (naming the closest known field) rather than
/// ignored, and a request of the wrong shape is told the shape expected.
indirect enum ChangeShape: Sendable {
  /// An object with exactly these fields (any of them may be left out);
  /// a field whose value holds objects names its shape.
  case object([String], nested: [String: ChangeShape] = [:])
  case array(ChangeShape)
  /// An object with any keys (Sendbird's days), each value of this shape.
  case map(ChangeShape)
  /// A string, number, true, false or null: the decoder checks which.
  case scalar

  /// The shape in brief, as an error message shows it.
  var sketch: String {
    switch self {
    case .object(let fields, let nested):
      let shown = fields.prefix(3).map { name in
        "\"\(name)\": " + (nested[name].map(\.sketch) ?? "…")
      }
      return "{" + shown.joined(separator: ", ") + (fields.count > 3 ? ", …" : "") + "}"
    case .array(let element): return "[" + element.sketch + ", …]"
    case .map(let value): return "{\"…\": " + value.sketch + "}"
    case .scalar: return "…"
    }
  }

  /// Refuses `data` (valid JSON) where it does not have this shape: the
  /// first unknown field in document order of paths, or a container of
  /// the wrong kind.
  func check(_ data: Data) throws(ApplyError) {
    let json: JSONTree
    do { json = try JSONDecoder().decode(JSONTree.self, from: data) } catch {
      throw .malformed(path: "$", reason: "\(error)")
    }
    try check(json, path: "$", root: self)
  }

  private func check(_ json: JSONTree, path: String, root: ChangeShape) throws(ApplyError) {
    switch (self, json) {
    case (.scalar, _): return
    case (.object(let fields, let nested), .object(let members)):
      for key in members.keys.sorted() {
        guard fields.contains(key) else {
          let near = Self.closest(to: key, in: fields)
          throw .malformed(
            path: path,
            reason: "unknown field \"\(Bounded.text(key))\""
              + (near.map { " (did you mean \"\($0)\"?)" } ?? "") + "; the fields are "
              + fields.joined(separator: ", "))
        }
        try (nested[key] ?? .scalar).check(members[key]!, path: path + "." + key, root: root)
      }
    case (.array(let element), .array(let items)):
      for (i, item) in items.enumerated() {
        try element.check(item, path: path + "[\(i)]", root: root)
      }
    case (.map(let value), .object(let members)):
      for key in members.keys.sorted() {
        try value.check(members[key]!, path: path + "." + key, root: root)
      }
    case (_, .null) where path != "$":
      return  // an absent optional, as the decoder takes it
    default:
      let expected =
        switch self {
        case .object, .map: "an object"
        case .array: "an array"
        case .scalar: "a value"
        }
      throw .malformed(
        path: path,
        reason:
          "expected \(expected)\(path == "$" ? "; this format's request is " + root.sketch : "")"
      )
    }
  }

  /// The known field nearest to `key` by edit distance, if near enough to
  /// be a misspelling.
  static func closest(to key: String, in fields: [String]) -> String? {
    let scored = fields.map { ($0, editDistance(Array(key.utf8), Array($0.utf8))) }
    guard let best = scored.min(by: { $0.1 < $1.1 }) else { return nil }
    return best.1 <= max(2, key.utf8.count / 3) ? best.0 : nil
  }

  private static func editDistance(_ a: [UInt8], _ b: [UInt8]) -> Int {
    guard !a.isEmpty else { return b.count }
    var previous = Array(0...b.count)
    for (i, x) in a.enumerated() {
      var current = [i + 1] + Array(repeating: 0, count: b.count)
      for (j, y) in b.enumerated() {
        current[j + 1] = min(previous[j + 1] + 1, current[j] + 1, previous[j] + (x == y ? 0 : 1))
      }
      previous = current
    }
    return previous[b.count]
  }
}

/// Any JSON value, as far as its shape goes: containers kept, scalars not.
private enum JSONTree: Decodable {
  case object([String: JSONTree])
  case array([JSONTree])
  case null
  case scalar

  struct Key: CodingKey {
    var stringValue: String
    var intValue: Int? { nil }
    init(stringValue: String) { self.stringValue = stringValue }
    init?(intValue: Int) { nil }
  }

  init(from decoder: any Decoder) throws {
    if let object = try? decoder.container(keyedBy: Key.self) {
      var members: [String: JSONTree] = [:]
      for key in object.allKeys {
        members[key.stringValue] = try object.decode(JSONTree.self, forKey: key)
      }
      self = .object(members)
    } else if var array = try? decoder.unkeyedContainer() {
      var items: [JSONTree] = []
      while !array.isAtEnd { items.append(try array.decode(JSONTree.self)) }
      self = .array(items)
    } else if (try? decoder.singleValueContainer().decodeNil()) == true {
      self = .null
    } else {
      self = .scalar
    }
  }
}
