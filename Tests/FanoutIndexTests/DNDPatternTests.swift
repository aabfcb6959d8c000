import FanoutIndex
import FanoutTestSupport
import Testing

@Suite("DND patterns")
struct DNDPatternTests {
  @Test("windows set exactly their minutes of the week, daily ones on every day")
  func windows() {
    var random = SeededRandom(seed: 11)
    for _ in 0..<400 {
      var pattern = DNDPattern()
      var minutes = Set<Int>()
      for _ in 0..<Int.random(in: 1...4, using: &random) {
        // Ends of 1439 run to midnight; starts and ends on word edges are common.
        let edges = [0, 63, 64, 65, 127, 128, 1_380, 1_438, 1_439]
        let start =
          Bool.random(using: &random)
          ? edges.randomElement(using: &random)! : Int.random(in: 0..<1_440, using: &random)
        var end =
          Bool.random(using: &random)
          ? edges.randomElement(using: &random)! : Int.random(in: 0..<1_440, using: &random)
        let end1440 = end == 1_439 ? 1_440 : end
        if Bool.random(using: &random) {
          if end <= start { end = min(1_439, start + 1) }
          let weekday = Int.random(in: 1...7, using: &random)
          pattern.addWeekly(weekday: weekday, start: start, end: end)
          let base = (weekday - 1) * 1_440
          minutes.formUnion((base + start)..<(base + (end == 1_439 ? 1_440 : end)))
        } else {
          pattern.addDaily(start: start, end: end)
          for day in 0..<7 {
            let base = day * 1_440
            if start == end {
              minutes.formUnion(base..<(base + 1_440))
            } else if start < end {
              minutes.formUnion((base + start)..<(base + end1440))
            } else {
              minutes.formUnion((base + start)..<(base + 1_440))
              minutes.formUnion(base..<(base + end1440))
            }
          }
        }
      }
      for m in 0..<(7 * 1_440) where pattern.contains(minuteOfWeek: m) != minutes.contains(m) {
        Issue.record(
          "minute \(m): \(pattern.contains(minuteOfWeek: m)), expected \(minutes.contains(m))")
        return
      }
    }
  }

  @Test(
    "schedules: weekly windows replace the daily one, in any row order; equal schedules share a pattern"
  )
  func schedules() {
    var random = SeededRandom(seed: 5)
    for round in 0..<60 {
      let users = Int.random(in: 1...300, using: &random)
      // Runs of users with one window (as a what-if gives everyone one), others apart.
      let windows = [(1_320, 420), (0, 0), (60, 120), (1_380, 360)]
      var daily: [(start: Int, end: Int)?] = []
      var run: (start: Int, end: Int)? = nil
      for _ in 0..<users {
        if Int.random(in: 0..<8, using: &random) == 0 {
          run = Bool.random(using: &random) ? windows.randomElement(using: &random)! : nil
        }
        daily.append(
          Int.random(in: 0..<10, using: &random) == 0
            ? (Int.random(in: 0..<1_440, using: &random), Int.random(in: 0..<1_440, using: &random))
            : run)
      }
      var weekly: [(user: Int32, weekday: Int, start: Int, end: Int)] = []
      for _ in 0..<Int.random(in: 0...40, using: &random) {
        let start = Int.random(in: 0..<1_439, using: &random)
        weekly.append(
          (
            Int32.random(in: 0..<Int32(users), using: &random),
            Int.random(in: 1...7, using: &random),
            start, Int.random(in: (start + 1)...1_439, using: &random)
          ))
      }
      if round % 2 == 0 { weekly.sort { $0.user < $1.user } }
      let made = DNDPattern.schedules(users: users, daily: daily, weekly: weekly)
      var expected: [[UInt64]?] = []
      for u in 0..<users {
        let own = weekly.filter { $0.user == u }
        var pattern = DNDPattern()
        if !own.isEmpty {
          for w in own { pattern.addWeekly(weekday: w.weekday, start: w.start, end: w.end) }
        } else if let window = daily[u] {
          pattern.addDaily(start: window.start, end: window.end)
        } else {
          expected.append(nil)
          continue
        }
        expected.append(pattern.words)
      }
      let count = DNDPattern.wordCount
      for u in 0..<users {
        let id = Int(made.userDND[u])
        let words = id < 0 ? nil : Array(made.words[(id * count)..<((id + 1) * count)])
        #expect(words == expected[u], "round \(round), user \(u)")
      }
      #expect(made.patterns == Set(expected.compactMap { $0 }).count, "round \(round)")
      #expect(made.words.count == made.patterns * count)
    }
  }
}
