import FanoutTime
import Foundation
import Testing

/// The local ISO weekday and minute of `seconds` in `zone`, from glibc's
/// `date`, which reads the same tz database independently of our code.
private func systemLocalTimes(_ zone: String, _ seconds: [Int64]) -> [Int] {
  let process = Process()
  process.executableURL = URL(fileURLWithPath: "/bin/sh")
  let script = seconds.map { "date -d @\($0) +%u:%H:%M" }.joined(separator: "; ")
  process.arguments = ["-c", script]
  process.environment = ["TZ": zone]
  let pipe = Pipe()
  process.standardOutput = pipe
  try! process.run()
  let output = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
  process.waitUntilExit()
  return output.split(separator: "\n").map { line in
    let parts = line.split(separator: ":").map { Int($0)! }
    return (parts[0] - 1) * 1440 + parts[1] * 60 + parts[2]
  }
}

@Suite("Time zones")
struct ZoneTableTests {
  static let zones = [
    "America/New_York", "Asia/Shanghai", "Europe/Berlin", "Australia/Sydney", "Asia/Kolkata",
    "America/Sao_Paulo",
    "Pacific/Chatham", "Africa/Casablanca", "Australia/Lord_Howe", "America/St_Johns", "UTC",
    "Europe/Dublin",
  ]

  @Test("minute of the week agrees with the system's date command", arguments: zones)
  func agreesWithSystem(_ name: String) throws {
    let zone = try TimeZoneDatabase().zone(named: name)
    // A seeded walk over 1950..2100, plus an hour either side of every change in 2026.
    var seconds: [Int64] = []
    var state: UInt64 = 0x9E37_79B9_7F4A_7C15
    for _ in 0..<300 {
      state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
      seconds.append(-631_152_000 + Int64(state >> 33) % 4_733_510_400)
    }
    var t: Int64 = 1_767_225_600  // 2026-01-01
    while t < 1_798_761_600 {
      let span = zone.offsetSpan(atMillis: t * 1000)
      guard span.until != .max else { break }
      let change = span.until / 1000
      seconds += [change - 3600, change - 1, change, change + 1, change + 3600]
      t = change + 1
    }
    let expected = systemLocalTimes(name, seconds)
    let actual = seconds.map {
      LocalTime.minuteOfWeek(
        utcMillis: $0 * 1000, offsetSeconds: zone.offsetSeconds(atMillis: $0 * 1000))
    }
    #expect(actual == expected)
  }

  @Test("New York switches at 07:00 UTC on 2026-03-08 and at 06:00 UTC on 2026-11-01")
  func newYork2026() throws {
    let zone = try TimeZoneDatabase().zone(named: "America/New_York")
    #expect(zone.offsetSeconds(atMillis: 1_772_953_199_999) == -5 * 3600)
    #expect(zone.offsetSeconds(atMillis: 1_772_953_200_000) == -4 * 3600)
    #expect(zone.offsetSeconds(atMillis: 1_793_512_799_999) == -4 * 3600)
    #expect(zone.offsetSeconds(atMillis: 1_793_512_800_000) == -5 * 3600)
  }

  @Test("rules after the last listed transition come from the file's POSIX footer")
  func farFuture() throws {
    let zone = try TimeZoneDatabase().zone(named: "Europe/Berlin")
    // 2150-07-01T12:00Z: summer time (UTC+2); 2150-01-01T12:00Z: winter (UTC+1).
    #expect(zone.offsetSeconds(atMillis: 5_696_222_400_000) == 7200)
    #expect(zone.offsetSeconds(atMillis: 5_680_540_800_000) == 3600)
  }

  @Test("unknown, mis-cased and path-like names are refused")
  func refusals() {
    let db = TimeZoneDatabase()
    for name in [
      "Mars/Base", "america/new_york", "../etc/passwd", "/etc/passwd", "", "America", "Asia/../UTC",
    ] {
      #expect(throws: TimeZoneError.self) { try db.zone(named: name) }
    }
  }

  @Test("local calendar arithmetic before 1970")
  func beforeEpoch() {
    // 1969-12-31T23:59:00Z was a Wednesday.
    #expect(LocalTime.minuteOfWeek(utcMillis: -60_000, offsetSeconds: 0) == 2 * 1440 + 1439)
    #expect(LocalTime.daysFromCivil(year: 1969, month: 12, day: 31) == -1)
    #expect(LocalTime.civilFromDays(-1) == (1969, 12, 31))
  }

  @Test("Unix milliseconds as RFC 3339 in UTC")
  func rfc3339() {
    #expect(LocalTime.rfc3339UTC(millis: 1_763_719_200_123) == "2025-11-21T10:00:00.123Z")
    #expect(LocalTime.rfc3339UTC(millis: 1_709_164_799_999) == "2024-02-28T23:59:59.999Z")
    #expect(LocalTime.rfc3339UTC(millis: 0) == "1970-01-01T00:00:00.000Z")
    #expect(LocalTime.rfc3339UTC(millis: -1) == "1969-12-31T23:59:59.999Z")
  }
}
