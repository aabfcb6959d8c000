/// How values from input and counts read in messages meant for people.

/// Text from input echoed in an error, a log line or a rejected line, cut
/// to a bounded size: a 20 MB id must not become a 20 MB message.
public enum Bounded {
  /// The most bytes of an echoed value kept.
  public static let limit = 200

  /// `text` whole when at most `limit` bytes, else its first bytes (cut at
  /// a character boundary) and "… (N bytes)".
  public static func text(_ text: String) -> String {
    let utf8 = text.utf8
    guard utf8.count > limit else { return text }
    var end = utf8.index(utf8.startIndex, offsetBy: limit)
    // Back to the start of a scalar: continuation bytes are 0b10xxxxxx.
    while end > utf8.startIndex && utf8[end] & 0xC0 == 0x80 { end = utf8.index(before: end) }
    return String(text[..<end]) + "… (\(utf8.count) bytes)"
  }

  /// `text(_:)` in single quotes, its control characters made visible.
  public static func quoted(_ value: String) -> String {
    "'" + Printable.text(text(value), keepingLines: false) + "'"
  }
}

/// Text for a terminal, from values someone else wrote (ids, names,
/// tokens): a control character — an escape sequence that would recolour
/// or rewrite the screen, a carriage return that would hide what came
/// before — is shown as `\u{1B}` instead of sent.
public enum Printable {
  /// `text` with its control characters (C0, DEL, C1) shown as `\u{…}`;
  /// with `keepingLines`, new lines and tabs stay (a report's own layout).
  public static func text(_ text: String, keepingLines: Bool = true) -> String {
    guard text.unicodeScalars.contains(where: { isControl($0, keepingLines) }) else { return text }
    var out = ""
    for scalar in text.unicodeScalars {
      if isControl(scalar, keepingLines) {
        out += "\\u{" + String(scalar.value, radix: 16, uppercase: true) + "}"
      } else {
        out.unicodeScalars.append(scalar)
      }
    }
    return out
  }

  private static func isControl(_ scalar: Unicode.Scalar, _ keepingLines: Bool) -> Bool {
    switch scalar.value {
    case 0x0A, 0x09: !keepingLines
    case 0x00..<0x20, 0x7F..<0xA0: true
    default: false
    }
  }
}

/// "1 message", "2 messages"; "1 delivery", "2 deliveries": counts in the
/// words people read.
public func counted(_ n: Int, _ noun: String, _ plural: String? = nil) -> String {
  "\(n) " + (n == 1 ? noun : plural ?? noun + "s")
}
