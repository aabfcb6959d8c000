/// Reads RFC 8536 TZif data (versions 1 to 4) and expands its POSIX TZ footer.
enum TZifParser {
  struct Failure: Error { let reason: String }

  /// The last year the footer rule is expanded to.
  static let lastExpandedYear: Int64 = 2200

  static func parse(_ data: [UInt8], name: String) throws(Failure) -> ZoneTable {
    var reader = ByteReader(data)
    guard data.count >= 44, data[0..<4].elementsEqual("TZif".utf8) else {
      throw Failure(reason: "no TZif header")
    }
    let version = data[4]
    var header = try reader.header()
    if version >= UInt8(ascii: "2") {
      // Skip the 32-bit block; the 64-bit one follows with its own header.
      try reader.skip(
        header.timecnt * 5 + header.typecnt * 6 + header.charcnt + header.leapcnt * 8
          + header.isstdcnt + header.isutcnt)
      header = try reader.header()
    }
    let timeSize = version >= UInt8(ascii: "2") ? 8 : 4
    var transitionTimes: [Int64] = []
    for _ in 0..<header.timecnt {
      transitionTimes.append(timeSize == 8 ? try reader.int64() : Int64(try reader.int32()))
    }
    var transitionTypes: [Int] = []
    for _ in 0..<header.timecnt { transitionTypes.append(Int(try reader.byte())) }
    var typeOffsets: [Int32] = []
    for _ in 0..<header.typecnt {
      typeOffsets.append(try reader.int32())
      try reader.skip(2)  // isdst, designation index
    }
    guard !typeOffsets.isEmpty, transitionTypes.allSatisfy({ $0 < typeOffsets.count }) else {
      throw Failure(reason: "bad local time types")
    }
    try reader.skip(
      header.charcnt + header.leapcnt * (timeSize + 4) + header.isstdcnt + header.isutcnt)

    var starts: [Int64] = [.min]
    var offsets: [Int32] = [typeOffsets[0]]
    for (time, type) in zip(transitionTimes, transitionTypes) {
      starts.append(Self.millis(time))
      offsets.append(typeOffsets[type])
    }
    if version >= UInt8(ascii: "2"), let footer = reader.footer(), !footer.isEmpty {
      let rule = try PosixTZRule(footer)
      let after = transitionTimes.last ?? .min
      for (time, offset) in rule.transitions(
        afterSeconds: after, throughYear: lastExpandedYear, initialOffset: offsets.last!)
      {
        starts.append(Self.millis(time))
        offsets.append(offset)
      }
      if transitionTimes.isEmpty && rule.dst == nil { offsets[0] = rule.stdOffset }
    }
    // Drop changes that keep the same offset: fewer steps for the search.
    var keptStarts: [Int64] = [starts[0]]
    var keptOffsets: [Int32] = [offsets[0]]
    for i in 1..<starts.count where offsets[i] != keptOffsets.last! {
      guard starts[i] > keptStarts.last! else { throw Failure(reason: "transitions out of order") }
      keptStarts.append(starts[i])
      keptOffsets.append(offsets[i])
    }
    return ZoneTable(name: name, starts: keptStarts, offsets: keptOffsets)
  }

  /// Seconds as milliseconds, clamped to Int64's range (a "big bang"
  /// transition at -2^59 s would otherwise overflow).
  static func millis(_ seconds: Int64) -> Int64 {
    let (value, overflow) = seconds.multipliedReportingOverflow(by: 1000)
    return overflow ? (seconds < 0 ? .min : .max) : value
  }
}

private struct ByteReader {
  let data: [UInt8]
  var position = 0
  init(_ data: [UInt8]) { self.data = data }

  struct Header {
    var isutcnt = 0, isstdcnt = 0, leapcnt = 0, timecnt = 0, typecnt = 0, charcnt = 0
  }

  mutating func header() throws(TZifParser.Failure) -> Header {
    guard position + 44 <= data.count, data[position..<position + 4].elementsEqual("TZif".utf8)
    else {
      throw TZifParser.Failure(reason: "truncated header")
    }
    position += 20
    var h = Header()
    h.isutcnt = Int(try int32())
    h.isstdcnt = Int(try int32())
    h.leapcnt = Int(try int32())
    h.timecnt = Int(try int32())
    h.typecnt = Int(try int32())
    h.charcnt = Int(try int32())
    guard
      [h.isutcnt, h.isstdcnt, h.leapcnt, h.timecnt, h.typecnt, h.charcnt].allSatisfy({ $0 >= 0 })
    else { throw TZifParser.Failure(reason: "negative count") }
    return h
  }

  mutating func skip(_ n: Int) throws(TZifParser.Failure) {
    guard n >= 0, position + n <= data.count else { throw TZifParser.Failure(reason: "truncated") }
    position += n
  }

  mutating func byte() throws(TZifParser.Failure) -> UInt8 {
    guard position < data.count else { throw TZifParser.Failure(reason: "truncated") }
    defer { position += 1 }
    return data[position]
  }

  mutating func int32() throws(TZifParser.Failure) -> Int32 {
    var v: UInt32 = 0
    for _ in 0..<4 { v = v << 8 | UInt32(try byte()) }
    return Int32(bitPattern: v)
  }

  mutating func int64() throws(TZifParser.Failure) -> Int64 {
    var v: UInt64 = 0
    for _ in 0..<8 { v = v << 8 | UInt64(try byte()) }
    return Int64(bitPattern: v)
  }

  /// The text between the two newlines that close a version 2+ file.
  func footer() -> String? {
    guard position < data.count, data[position] == UInt8(ascii: "\n") else { return nil }
    guard let end = data[(position + 1)...].firstIndex(of: UInt8(ascii: "\n")) else { return nil }
    return String(decoding: data[(position + 1)..<end], as: UTF8.self)
  }
}
