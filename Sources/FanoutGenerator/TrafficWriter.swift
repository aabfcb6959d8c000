import FanoutTime

#if canImport(Glibc)
  import Glibc
#endif

/// Writes a day of traffic over the population's channels, in time order.
enum TrafficWriter {
  static let categories = ["account", "digest", "marketing", "newsletter", "security", "social"]

  static func write(
    _ p: Population, messages: Int, profile: Profile, to path: String, random: inout Random,
    v2: inout V2Features?, v3: inout V3Features?, report: inout GeneratorReport,
    progress: (Int) -> Void
  ) throws {
    // (Never through a link: the path is a partial file `fanout gen` made
    // in the output folder, and someone may have swapped it since.)
    let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0o644)
    guard fd >= 0, let file = fdopen(fd, "w") else {
      if fd >= 0 { close(fd) }
      throw GeneratorError(description: "cannot write \(path)")
    }
    defer { fclose(file) }
    let broadcasts = p.channels.filter { $0.kind == .broadcast }.count
    let directs = p.channels.filter { $0.kind == .direct }.count
    let groups = p.channels.count - broadcasts - directs
    // chat: 0.016% broadcast (about a third of the pairs), 65% direct, the rest groups;
    // broadcast: 90% broadcast.
    let broadcastShare = profile == .chat ? 0.00016 : 0.9
    var line: [UInt8] = []
    line.reserveCapacity(512)
    for i in 0..<messages {
      if i % 16_384 == 0 { progress(i) }
      let ts =
        Generator.day + Int64(i) * Generator.dayMillis / Int64(max(1, messages))
        + Int64(random.below(1000))
      let r = random.unit()
      let c: Int
      if r < broadcastShare {
        c = random.below(broadcasts)
      } else if random.chance(0.65) {
        c = broadcasts + random.below(directs)
      } else {
        c = broadcasts + directs + random.below(groups)
      }
      let channel = p.channels[c]
      let members = channel.members
      let sender: Int32? =
        random.chance(channel.kind == .broadcast ? 0.5 : 0.97)
        ? members[random.below(members.count)] : nil
      report.pairs += members.count - (sender == nil ? 0 : 1)
      report.messages += 1

      var text = "{\"id\":\"g\(i)\",\"channel\":\"\(channel.id)\""
      if let sender { text += ",\"sender\":\"\(Population.userID(Int(sender)))\"" }
      if random.chance(0.1) {
        text += ",\"ts\":\"" + LocalTime.rfc3339UTC(millis: ts) + "\""
      } else {
        text += ",\"ts\":\(ts)"
      }
      let k = random.unit()
      if k < 0.04 {
        text += ",\"kind\":\"call\""
      } else if k < 0.07 {
        text += ",\"kind\":\"pinned\""
      }
      if channel.kind != .direct && random.chance(0.15) {
        let mentioned = (0..<(1 + random.below(3))).map { _ in
          "\"\(Population.userID(Int(members[random.below(members.count)])))\""
        }
        text += ",\"mentions\":[" + mentioned.joined(separator: ",") + "]"
      }
      if channel.kind == .group && random.chance(0.01) { text += ",\"mention_all\":true" }
      if random.chance(0.1) {
        text += ",\"reply_to\":\"\(Population.userID(Int(members[random.below(members.count)])))\""
      }
      if random.chance(channel.kind == .broadcast ? 0.5 : 0.02) {
        text += ",\"category\":\"\(categories[random.below(categories.count)])\""
      }
      if random.chance(0.005) { text += ",\"force\":true" }
      if v2 != nil { text += v2!.fields(kind: channel.kind) }
      text += "}\n"
      if let read = v3?.readLine(after: i, channel: channel.id, members: members, ts: ts) {
        text += read + "\n"
      }
      line.removeAll(keepingCapacity: true)
      line.append(contentsOf: text.utf8)
      guard fwrite(line, 1, line.count, file) == line.count else {
        throw GeneratorError(description: "cannot write \(path)")
      }
    }
  }
}
