/// A POSIX TZ string as found in a TZif footer, e.g. `EST5EDT,M3.2.0,M11.1.0`
/// or `<+0330>-3:30`, with the RFC 8536 extensions (hours up to 167, negative
/// rule times).
struct PosixTZRule {
  /// A day-of-year rule: `Jn`, `n` or `Mm.w.d`, plus the local time of day.
  enum Day {
    case julianNoLeap(Int64)  // 1...365, February 29 never counted
    case zeroBased(Int64)  // 0...365
    case monthWeekDay(month: Int64, week: Int64, weekday: Int64)
  }

  struct DSTRule {
    let offset: Int32
    let start: Day, startTime: Int64
    let end: Day, endTime: Int64
  }

  let stdOffset: Int32
  let dst: DSTRule?

  init(_ text: String) throws(TZifParser.Failure) {
    var s = Scanner(Array(text.utf8))
    try s.name()
    stdOffset = -(try s.offset())
    if s.atEnd {
      dst = nil
      return
    }
    try s.name()
    var dstOffset = stdOffset + 3600
    if !s.atEnd && s.peek != UInt8(ascii: ",") { dstOffset = -(try s.offset()) }
    try s.expect(UInt8(ascii: ","))
    let start = try s.day()
    let startTime = s.peek == UInt8(ascii: "/") ? try s.ruleTime() : 7200
    try s.expect(UInt8(ascii: ","))
    let end = try s.day()
    let endTime = s.peek == UInt8(ascii: "/") ? try s.ruleTime() : 7200
    guard s.atEnd else { throw TZifParser.Failure(reason: "trailing text in TZ rule '\(text)'") }
    dst = DSTRule(offset: dstOffset, start: start, startTime: startTime, end: end, endTime: endTime)
  }

  /// The offset changes after `afterSeconds`, in order, through the end of `throughYear`.
  func transitions(afterSeconds: Int64, throughYear lastYear: Int64, initialOffset: Int32) -> [(
    Int64, Int32
  )] {
    guard let dst else {
      return stdOffset == initialOffset
        ? [] : [(afterSeconds == .min ? .min + 1 : afterSeconds + 1, stdOffset)]
    }
    let firstYear =
      afterSeconds == .min
      ? 1900 : LocalTime.civilFromDays(LocalTime.floorDiv(afterSeconds, 86_400)).year
    var result: [(Int64, Int32)] = []
    for year in firstYear...max(firstYear, lastYear) {
      // DST starts at a standard-time wall clock and ends at a DST wall clock.
      let start = Self.dayNumber(dst.start, year: year) * 86_400 + dst.startTime - Int64(stdOffset)
      let end = Self.dayNumber(dst.end, year: year) * 86_400 + dst.endTime - Int64(dst.offset)
      for (time, offset) in [(start, dst.offset), (end, stdOffset)].sorted(by: { $0.0 < $1.0 })
      where time > afterSeconds {
        result.append((time, offset))
      }
    }
    return result
  }

  /// Days since 1970-01-01 of the rule's day in `year`.
  static func dayNumber(_ day: Day, year: Int64) -> Int64 {
    let jan1 = LocalTime.daysFromCivil(year: year, month: 1, day: 1)
    switch day {
    case .julianNoLeap(let n):
      return jan1 + n - 1 + (LocalTime.isLeapYear(year) && n >= 60 ? 1 : 0)
    case .zeroBased(let n):
      return jan1 + n
    case .monthWeekDay(let month, let week, let weekday):
      let first = LocalTime.daysFromCivil(year: year, month: month, day: 1)
      let firstWeekday = (first + 4) - LocalTime.floorDiv(first + 4, 7) * 7  // 0 = Sunday
      var day = first + (weekday - firstWeekday + 7) % 7 + (week - 1) * 7
      let nextMonth =
        month == 12
        ? LocalTime.daysFromCivil(year: year + 1, month: 1, day: 1)
        : LocalTime.daysFromCivil(year: year, month: month + 1, day: 1)
      while day >= nextMonth { day -= 7 }  // week 5 means the last such weekday
      return day
    }
  }
}

private struct Scanner {
  let b: [UInt8]
  var i = 0
  init(_ b: [UInt8]) { self.b = b }

  var atEnd: Bool { i >= b.count }
  var peek: UInt8? { i < b.count ? b[i] : nil }

  mutating func expect(_ c: UInt8) throws(TZifParser.Failure) {
    guard peek == c else { throw fail() }
    i += 1
  }

  func fail() -> TZifParser.Failure {
    TZifParser.Failure(reason: "bad TZ rule '\(String(decoding: b, as: UTF8.self))'")
  }

  mutating func name() throws(TZifParser.Failure) {
    if peek == UInt8(ascii: "<") {
      while let c = peek, c != UInt8(ascii: ">") { i += 1 }
      try expect(UInt8(ascii: ">"))
    } else {
      let start = i
      while let c = peek, (c | 0x20) >= UInt8(ascii: "a") && (c | 0x20) <= UInt8(ascii: "z") {
        i += 1
      }
      guard i - start >= 3 else { throw fail() }
    }
  }

  mutating func number() throws(TZifParser.Failure) -> Int64 {
    var v: Int64 = 0
    let start = i
    while let c = peek, c >= 0x30 && c <= 0x39 {
      v = v * 10 + Int64(c - 0x30)
      i += 1
    }
    guard i > start else { throw fail() }
    return v
  }

  /// `[+-]hh[:mm[:ss]]` in seconds.
  mutating func hms() throws(TZifParser.Failure) -> Int64 {
    var sign: Int64 = 1
    if peek == UInt8(ascii: "-") {
      sign = -1
      i += 1
    } else if peek == UInt8(ascii: "+") {
      i += 1
    }
    var seconds = try number() * 3600
    if peek == UInt8(ascii: ":") {
      i += 1
      seconds += try number() * 60
      if peek == UInt8(ascii: ":") {
        i += 1
        seconds += try number()
      }
    }
    return sign * seconds
  }

  mutating func offset() throws(TZifParser.Failure) -> Int32 { Int32(try hms()) }

  mutating func ruleTime() throws(TZifParser.Failure) -> Int64 {
    try expect(UInt8(ascii: "/"))
    return try hms()
  }

  mutating func day() throws(TZifParser.Failure) -> PosixTZRule.Day {
    switch peek {
    case UInt8(ascii: "J"):
      i += 1
      let n = try number()
      guard (1...365).contains(n) else { throw fail() }
      return .julianNoLeap(n)
    case UInt8(ascii: "M"):
      i += 1
      let m = try number()
      try expect(UInt8(ascii: "."))
      let w = try number()
      try expect(UInt8(ascii: "."))
      let d = try number()
      guard (1...12).contains(m), (1...5).contains(w), (0...6).contains(d) else { throw fail() }
      return .monthWeekDay(month: m, week: w, weekday: d)
    default:
      let n = try number()
      guard (0...365).contains(n) else { throw fail() }
      return .zeroBased(n)
    }
  }
}
