/// FanoutTime owns local time: it reads IANA zones from the system's tz
/// database (TZif files, as Debian's tzdata installs them) into sorted
/// UTC-offset tables once, and turns an instant into the local minute of the
/// week with integer math. It imports no Foundation: the files are the source
/// of truth, so the rules follow exactly the tzdata the machine has.

/// One time zone as a sorted table of UTC-offset changes.
///
/// `starts[i]` is the first Unix millisecond at which `offsets[i]` (seconds
/// east of UTC) is in force; `starts[0]` is `Int64.min`. The table runs to the
/// end of year 2200 (the file's POSIX rule is expanded that far); later
/// instants keep the last offset.
public struct ZoneTable: Sendable, Equatable {
  public let name: String
  @usableFromInline let starts: [Int64]
  @usableFromInline let offsets: [Int32]

  init(name: String, starts: [Int64], offsets: [Int32]) {
    precondition(!starts.isEmpty && starts.count == offsets.count && starts[0] == .min)
    self.name = name
    self.starts = starts
    self.offsets = offsets
  }

  /// A zone with one fixed offset (UTC is `ZoneTable.utc`).
  public init(fixedName name: String, offsetSeconds: Int32) {
    self.init(name: name, starts: [.min], offsets: [offsetSeconds])
  }

  public static let utc = ZoneTable(fixedName: "UTC", offsetSeconds: 0)

  /// The span `[from, until)` of instants sharing the offset in force at
  /// `millis`, with that offset, so callers can cache one lookup.
  ///
  /// - Complexity: O(log n) in the table size; does not allocate.
  @inlinable
  public func offsetSpan(atMillis millis: Int64) -> (from: Int64, until: Int64, offset: Int32) {
    starts.withUnsafeBufferPointer { s in
      // Binary search for the last start <= millis; s[0] is Int64.min.
      var lo = 0
      var hi = s.count
      while hi - lo > 1 {
        let mid = (lo &+ hi) &>> 1
        if s[mid] <= millis { lo = mid } else { hi = mid }
      }
      let until = lo + 1 < s.count ? s[lo + 1] : .max
      return (s[lo], until, offsets[lo])
    }
  }

  /// Seconds east of UTC in force at `millis`.
  @inlinable
  public func offsetSeconds(atMillis millis: Int64) -> Int32 {
    offsetSpan(atMillis: millis).offset
  }
}

/// Local calendar arithmetic on Unix milliseconds, rounding toward minus
/// infinity so that instants before 1970 work too.
public enum LocalTime {
  public static let minutesPerWeek = 10_080

  @inlinable @inline(__always)
  public static func floorDiv(_ a: Int64, _ b: Int64) -> Int64 {
    let q = a / b
    return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q
  }

  /// The hour of the UTC day (0–23) of Unix milliseconds `millis`.
  @inlinable @inline(__always)
  public static func utcHour(millis: Int64) -> Int {
    Int(floorDiv(millis, 3_600_000) % 24 + 24) % 24
  }

  /// The local minute of the ISO week (0 = Monday 00:00 .. 10079 = Sunday 23:59)
  /// of `utcMillis` under `offsetSeconds`; seconds are dropped.
  @inlinable @inline(__always)
  public static func minuteOfWeek(utcMillis: Int64, offsetSeconds: Int32) -> Int {
    let localMinute = floorDiv(utcMillis &+ Int64(offsetSeconds) &* 1000, 60_000)
    let day = floorDiv(localMinute, 1440)
    let weekdayFromMonday = (day &+ 3) - floorDiv(day &+ 3, 7) &* 7  // 1970-01-01 was a Thursday
    return Int(weekdayFromMonday &* 1440 &+ (localMinute &- day &* 1440))
  }

  /// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
  @inlinable
  public static func daysFromCivil(year: Int64, month: Int64, day: Int64) -> Int64 {
    let y = month <= 2 ? year - 1 : year
    let era = floorDiv(y, 400)
    let yoe = y - era * 400
    let mp = (month + 9) % 12
    let doy = (153 * mp + 2) / 5 + day - 1
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy
    return era * 146_097 + doe - 719_468
  }

  /// The (year, month, day) of a day count since 1970-01-01.
  public static func civilFromDays(_ days: Int64) -> (year: Int64, month: Int64, day: Int64) {
    let z = days + 719_468
    let era = floorDiv(z, 146_097)
    let doe = z - era * 146_097
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
    let mp = (5 * doy + 2) / 153
    let d = doy - (153 * mp + 2) / 5 + 1
    let m = mp < 10 ? mp + 3 : mp - 9
    return (yoe + era * 400 + (m <= 2 ? 1 : 0), m, d)
  }

  /// `2026-11-21T10:00:00.123Z`: Unix milliseconds as an RFC 3339 time in UTC.
  public static func rfc3339UTC(millis: Int64) -> String {
    func pad(_ v: Int64, _ width: Int) -> String {
      let s = String(v)
      return String(repeating: "0", count: max(0, width - s.count)) + s
    }
    let days = floorDiv(millis, 86_400_000)
    let ms = millis &- days &* 86_400_000  // exact: the true value is in 0..<86_400_000
    let (y, m, d) = civilFromDays(days)
    return "\(pad(y, 4))-\(pad(m, 2))-\(pad(d, 2))T\(pad(ms / 3_600_000, 2)):"
      + "\(pad(ms / 60_000 % 60, 2)):\(pad(ms / 1000 % 60, 2)).\(pad(ms % 1000, 3))Z"
  }

  public static func isLeapYear(_ y: Int64) -> Bool { (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 }
}
