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

extension DNDPattern {
  /// Each user's schedule as a pattern row (-1 for none) and the distinct
  /// patterns' words, `wordCount` each: weekly windows replace the daily
  /// window, and equal schedules share a pattern.
  public static func schedules(
    users userCount: Int, daily: [(start: Int, end: Int)?],
    weekly: [(user: Int32, weekday: Int, start: Int, end: Int)]
  ) -> (userDND: [Int32], words: [UInt64], patterns: Int) {
    var patternIDs: [DNDPattern: Int32] = [:]
    // Most schedules are a daily window: each distinct one is built and
    // hashed once, and users in a row with the same one (a what-if giving
    // everyone 22–07) not even looked up again.
    var dailyIDs: [Int: Int32] = [:]  // start << 11 | end
    var lastDaily: (key: Int, id: Int32)? = nil
    var words: [UInt64] = []
    var userDND = [Int32](repeating: -1, count: userCount)
    // The weekly windows by user (as read, mostly), met in user order: no
    // lookup per user. (A pattern is the union of its windows: any order.)
    let weekly =
      zip(weekly, weekly.dropFirst()).allSatisfy { $0.user <= $1.user }
      ? weekly : weekly.sorted { $0.user < $1.user }
    var nextWeekly = 0
    for u in 0..<userCount {
      var pattern: DNDPattern
      var dailyKey: Int? = nil
      while nextWeekly < weekly.count && weekly[nextWeekly].user < u { nextWeekly += 1 }
      if nextWeekly < weekly.count && weekly[nextWeekly].user == u {
        pattern = DNDPattern()
        while nextWeekly < weekly.count && weekly[nextWeekly].user == u {
          let w = weekly[nextWeekly]
          pattern.addWeekly(weekday: w.weekday, start: w.start, end: w.end)
          nextWeekly += 1
        }
      } else if let window = daily[u] {
        let key = window.start << 11 | window.end
        if let last = lastDaily, last.key == key {
          userDND[u] = last.id
          continue
        }
        if let id = dailyIDs[key] {
          userDND[u] = id
          lastDaily = (key, id)
          continue
        }
        dailyKey = key
        pattern = DNDPattern()
        pattern.addDaily(start: window.start, end: window.end)
      } else {
        continue
      }
      let id: Int32
      if let existing = patternIDs[pattern] {
        id = existing
      } else {
        id = Int32(patternIDs.count)
        patternIDs[pattern] = id
        words += pattern.words
      }
      userDND[u] = id
      if let dailyKey {
        dailyIDs[dailyKey] = id
        lastDaily = (dailyKey, id)
      }
    }
    return (userDND, words, patternIDs.count)
  }
}
