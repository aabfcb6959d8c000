/// FanoutReport owns the pieces of the HTML reports (`fanout whatif`'s and
/// `fanout audit`'s pages): one page shell and style, cards, tables, bar
/// charts, and the words and numbers in them. Self-contained pages: inline
/// CSS and SVG, no script, no network; the same bytes for the same inputs.

/// Text escaping for HTML and SVG.
public enum HTML {
  public static func escape(_ s: String) -> String {
    var out = ""
    for c in s {
      switch c {
      case "&": out += "&amp;"
      case "<": out += "&lt;"
      case ">": out += "&gt;"
      case "\"": out += "&quot;"
      default: out.append(c)
      }
    }
    return out
  }
}

/// Number formatting for people.
public enum Format {
  /// 1234567 → "1,234,567".
  public static func grouped(_ n: Int) -> String {
    let digits = String(n.magnitude)
    var out = ""
    for (i, d) in digits.enumerated() {
      if i > 0 && (digits.count - i) % 3 == 0 { out += "," }
      out.append(d)
    }
    return (n < 0 ? "−" : "") + out
  }

  /// A signed change: "+1,234", "−56", "0".
  public static func signed(_ n: Int) -> String { n > 0 ? "+" + grouped(n) : grouped(n) }

  /// 1200 → "1.2k", 3400000 → "3.4M", −1200 → "−1.2k".
  public static func compact(_ n: Int) -> String {
    if n < 0 { return "−" + compact(-n) }
    for (unit, size) in [("G", 1_000_000_000), ("M", 1_000_000), ("k", 1_000)] where n >= size {
      let tenths = (n * 10 + size / 2) / size
      return tenths % 10 == 0 ? "\(tenths / 10)\(unit)" : "\(tenths / 10).\(tenths % 10)\(unit)"
    }
    return String(n)
  }

  /// The change from a to b in percent, one decimal: "−12.5%"; "new" from 0.
  public static func percent(from a: Int, to b: Int) -> String {
    guard a != 0 else { return b == 0 ? "0%" : "new" }
    let magnitude = share(abs(b - a), of: a)
    return (magnitude == "0.0%" ? "" : b > a ? "+" : "−") + magnitude
  }

  /// `part` as a percentage of `whole`, one decimal: "16.3%".
  public static func share(_ part: Int, of whole: Int) -> String {
    guard whole > 0 else { return "0%" }
    let tenths = Int((Double(part) / Double(whole) * 1000).rounded())
    return "\(tenths / 10).\(tenths % 10)%"
  }
}

/// A word for a POSIX shell: as it is when it is plain, else in single quotes.
public enum ShellWord {
  /// Whether a word of these bytes stands for itself in a shell.
  public static func isPlain<S: Sequence>(_ word: S) -> Bool where S.Element == UInt8 {
    var empty = true
    for c in word {
      empty = false
      guard
        (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A)
          || c == 0x5F || c == 0x2E || c == 0x2F || c == 0x3A || c == 0x40 || c == 0x25
          || c == 0x2B || c == 0x3D || c == 0x2C || c == 0x2D  // _ . / : @ % + = , -
      else { return false }
    }
    return !empty
  }

  public static func quoted(_ word: String) -> String {
    return isPlain(word.utf8)
      ? word
      : "'"
        + word.split(separator: "'", omittingEmptySubsequences: false).joined(separator: #"'\''"#)
        + "'"
  }
}
