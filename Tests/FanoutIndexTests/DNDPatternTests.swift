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
}
