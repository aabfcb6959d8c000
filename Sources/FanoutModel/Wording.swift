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

  /// `text(_:)` in single quotes.
  public static func quoted(_ value: String) -> String { "'" + text(value) + "'" }
}

/// "1 message", "2 messages"; "1 delivery", "2 deliveries": counts in the
/// words people read.
public func counted(_ n: Int, _ noun: String, _ plural: String? = nil) -> String {
  "\(n) " + (n == 1 ? noun : plural ?? noun + "s")
}
