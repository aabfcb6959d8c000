import FanoutTime

/// RFC 3339 date-times (`2026-03-08T07:00:00.123+08:00`): a zone offset is
/// required, `T`/`t` and `Z`/`z` are accepted, fractions beyond the
/// millisecond are truncated. Leap seconds (`:60`) are refused: Unix time
/// cannot name them.
public enum RFC3339 {
  /// Unix milliseconds, or nil when `bytes` are not an RFC 3339 date-time.
  public static func parse(_ bytes: [UInt8]) -> Int64? { bytes.withUnsafeBytes { parse($0) } }

  /// Unix milliseconds, or nil when `b` is not an RFC 3339 date-time.
  public static func parse(_ b: UnsafeRawBufferPointer) -> Int64? {
    var i = 0
    func digits(_ n: Int) -> Int64? {
      guard i + n <= b.count else { return nil }
      var v: Int64 = 0
      for k in 0..<n {
        let c = b[i + k]
        guard c >= 0x30 && c <= 0x39 else { return nil }
        v = v * 10 + Int64(c - 0x30)
      }
      i += n
      return v
    }
    func take(_ c: UInt8, or other: UInt8? = nil) -> Bool {
      guard i < b.count, b[i] == c || b[i] == other else { return false }
      i += 1
      return true
    }
    guard let year = digits(4), take(UInt8(ascii: "-")), let month = digits(2),
      take(UInt8(ascii: "-")),
      let day = digits(2), take(UInt8(ascii: "T"), or: UInt8(ascii: "t")), let hour = digits(2),
      take(UInt8(ascii: ":")), let minute = digits(2), take(UInt8(ascii: ":")),
      let second = digits(2)
    else { return nil }
    guard (1...12).contains(month), day >= 1, day <= daysIn(month: month, year: year), hour < 24,
      minute < 60,
      second < 60
    else { return nil }
    var millis: Int64 = 0
    if take(UInt8(ascii: ".")) {
      let start = i
      var scale: Int64 = 100
      while i < b.count, b[i] >= 0x30 && b[i] <= 0x39 {
        millis += Int64(b[i] - 0x30) * scale
        scale /= 10
        i += 1
      }
      guard i > start else { return nil }
    }
    var offsetMinutes: Int64 = 0
    if take(UInt8(ascii: "Z"), or: UInt8(ascii: "z")) {
      offsetMinutes = 0
    } else if i < b.count, b[i] == UInt8(ascii: "+") || b[i] == UInt8(ascii: "-") {
      let sign: Int64 = b[i] == UInt8(ascii: "-") ? -1 : 1
      i += 1
      guard let oh = digits(2), take(UInt8(ascii: ":")), let om = digits(2), oh < 24, om < 60 else {
        return nil
      }
      offsetMinutes = sign * (oh * 60 + om)
    } else {
      return nil
    }
    guard i == b.count else { return nil }
    let days = LocalTime.daysFromCivil(year: year, month: month, day: day)
    let seconds = days * 86_400 + hour * 3600 + minute * 60 + second - offsetMinutes * 60
    return seconds * 1000 + millis
  }

  static func daysIn(month: Int64, year: Int64) -> Int64 {
    switch month {
    case 2: LocalTime.isLeapYear(year) ? 29 : 28
    case 4, 6, 9, 11: 30
    default: 31
    }
  }
}
