import FanoutTime

/// A do-not-disturb schedule as a set of local minutes of the ISO week
/// (0 = Monday 00:00 … 10079 = Sunday 23:59), so that the check for a pair is
/// one bit test. Daily windows repeat on all seven days.
public struct DNDPattern: Hashable, Sendable {
  public static let wordCount = (LocalTime.minutesPerWeek + 63) / 64
  public private(set) var words = [UInt64](repeating: 0, count: wordCount)

  public init() {}

  /// The contract's window end: 1439 (23:59) runs to midnight.
  @inlinable static func effectiveEnd(_ end: Int) -> Int { end == 1439 ? 1440 : end }

  /// Adds the minutes `[start, end)` of one weekday (ISO 1...7); `start < end`.
  public mutating func addWeekly(weekday: Int, start: Int, end: Int) {
    let base = (weekday - 1) * 1440
    insert(base + start, base + Self.effectiveEnd(end))
  }

  /// Adds a daily window on every day: `start < end` same day, `start > end`
  /// past midnight, `start == end` the whole day.
  public mutating func addDaily(start: Int, end: Int) {
    for day in 0..<7 {
      let base = day * 1440
      if start == end {
        insert(base, base + 1440)
      } else if start < end {
        insert(base + start, base + Self.effectiveEnd(end))
      } else {
        insert(base + start, base + 1440)
        insert(base, base + Self.effectiveEnd(end))
      }
    }
  }

  /// Sets the minutes `[from, to)`, a word's run of them at a time.
  private mutating func insert(_ from: Int, _ to: Int) {
    var minute = from
    while minute < to {
      let bit = minute & 63
      let count = min(64 - bit, to - minute)
      let run: UInt64 = count == 64 ? ~0 : ((1 << UInt64(count)) - 1) << UInt64(bit)
      words[minute >> 6] |= run
      minute += count
    }
  }

  public func contains(minuteOfWeek m: Int) -> Bool { words[m >> 6] & (1 << UInt64(m & 63)) != 0 }
}
