import FanoutIndex
import FanoutKernel
import FanoutModel
import FanoutReport
import FanoutTime
import FanoutTraffic

#if canImport(Glibc)
  import Glibc
#endif

/// Compares one message's pushes with what the rules deliver, pair by pair
/// and device by device, and writes its findings, tallied. Allocates
/// nothing per pair: the pushes sorted by user and device are walked beside
/// the pairs (in user order), so a device's pushes lie side by side.
struct MessageAuditor {
  let index: Index
  let toleranceMs: Int64
  /// `fanout explain --snapshot S --messages T`, quoted for a shell.
  let explainCommand: String
  let logNames: [String]
  /// Written before a finding's explain command's arguments, and before
  /// its log line's number: JSON string openings.
  private let explainPrefix: [UInt8]
  private let logPrefixes: [[UInt8]]
  /// What the logs' pushes named that the index does not have.
  let names: PushNames
  private var found: [Found] = []
  var tally: AuditTally
  /// Finding lines not yet written.
  var lines: [UInt8] = []

  init(
    index: Index, toleranceMs: Int64, explainCommand: String, logNames: [String],
    names: PushNames
  ) {
    self.names = names
    self.index = index
    self.toleranceMs = toleranceMs
    self.explainCommand = explainCommand
    explainPrefix = JSONText.quoted(explainCommand).dropLast()
    logPrefixes = logNames.map { JSONText.quoted($0 + ":").dropLast() }
    self.logNames = logNames
    tally = AuditTally(gateways: index.gateways.count)
  }

  /// One finding before it is written: sorted by user, a user's pushes'
  /// findings before the devices missed.
  private struct Found {
    var kind: FindingKind
    var user: Int32
    var device: Int32
    var push: Int?
    var reason: String?
    var deliverAt: Int64?
    var order: Int
  }

  /// Audits message `m` of `batch`: its pairs are `pairs` of `result`
  /// (evaluated with `Evaluator.Output.audit`), the log's pushes for its
  /// line `pushes`.
  mutating func audit(
    _ batch: MessageBatch, _ m: Int, _ result: ChunkResult, pairs: Range<Int>,
    pushes: inout [SentPush]
  ) {
    let line = batch.lines[m]
    let hour = Int(LocalTime.utcHour(millis: batch.ts[m]))
    found.removeAll(keepingCapacity: true)
    pushes.sort { a, b in
      (UInt32(bitPattern: a.user), UInt32(bitPattern: a.device), a.file, a.logLine)
        < (UInt32(bitPattern: b.user), UInt32(bitPattern: b.device), b.file, b.logLine)
    }
    // Pushes and pairs are both in user row order: the pairs are searched
    // from where the last push's user was found.
    var from = pairs.lowerBound
    for (k, push) in pushes.enumerated() {
      if push.device >= 0 {
        tally.countSent(gateway: Int(push.gateway), hour: hour)
      } else {
        tally.countSent(gateway: gatewayKey(push), hour: hour)
      }
      func note(_ kind: FindingKind, reason: String? = nil, deliverAt: Int64? = nil) {
        found.append(
          Found(
            kind: kind, user: push.user, device: push.device, push: k, reason: reason,
            deliverAt: deliverAt, order: found.count))
      }
      guard push.user >= 0 else {
        note(.spurious, reason: SpuriousReason.unknownUser.name)
        tally.spurious[SpuriousReason.unknownUser.slot] += 1
        continue
      }
      from = firstPair(from: from, atLeast: push.user, in: pairs, result)
      guard from < pairs.upperBound, result.pairUsers[from] == push.user else {
        let why: SpuriousReason = push.user == batch.sender[m] ? .sender : .notMember
        note(.spurious, reason: why.name)
        tally.spurious[why.slot] += 1
        continue
      }
      let p = from
      let outcome = result.pairOutcomes[p]
      guard outcome.isDelivered else {
        let reason = Reason(rawValue: outcome.rawValue - UInt8(Trigger.allCases.count))!
        note(.spurious, reason: reason.name)
        tally.spurious[SpuriousReason.rule(reason).slot] += 1
        continue
      }
      let deliverAt = result.pairDeliverAt[p]
      guard push.device >= 0 else {
        note(.wrongDevice, reason: WrongDeviceReason.notUsersDevice.name, deliverAt: deliverAt)
        tally.wrongDevice[WrongDeviceReason.notUsersDevice.rawValue] += 1
        continue
      }
      guard devices(of: p, result).contains(push.device) else {
        note(.wrongDevice, reason: WrongDeviceReason.gateBlocks.name, deliverAt: deliverAt)
        tally.wrongDevice[WrongDeviceReason.gateBlocks.rawValue] += 1
        continue
      }
      // Sorted: the device's earlier pushes, if any, are just before; they
      // came this far too (same user, same pair, same device).
      if k > 0 && pushes[k - 1].user == push.user && pushes[k - 1].device == push.device {
        note(.duplicate, deliverAt: deliverAt)
      } else if let sentAt = push.sentAt, Self.isMore(deliverAt, than: toleranceMs, after: sentAt) {
        note(.early, deliverAt: deliverAt)
      } else if let sentAt = push.sentAt, Self.isMore(sentAt, than: toleranceMs, after: deliverAt) {
        note(.late, deliverAt: deliverAt)
      } else {
        tally.agree += 1
      }
    }
    // Pairs are in user row order, pushes too (unknown users, -1, last):
    // `cursor` is the first push of the pair's user, if any.
    var cursor = 0
    for p in pairs where result.pairOutcomes[p].isDelivered {
      let u = result.pairUsers[p]
      while cursor < pushes.count && UInt32(bitPattern: pushes[cursor].user) < UInt32(bitPattern: u)
      {
        cursor += 1
      }
      for (d, gateway) in zip(devices(of: p, result), gateways(of: p, result)) {
        tally.expect(gateway: Int(gateway), hour: hour)
        var sent = false
        var k = cursor
        while k < pushes.count && pushes[k].user == u {
          if pushes[k].device == d {
            sent = true
            break
          }
          k += 1
        }
        if !sent {
          found.append(
            Found(
              kind: .missed, user: result.pairUsers[p], device: d, push: nil, reason: nil,
              deliverAt: result.pairDeliverAt[p], order: found.count + pushes.count))
        }
      }
    }
    found.sort { a, b in
      (UInt32(bitPattern: a.user), a.order) < (UInt32(bitPattern: b.user), b.order)
    }
    for f in found {
      let push = f.push.map { pushes[$0] }
      tally.count(
        f.kind, gateway: push.map(gatewayKey) ?? .row(Int(index.deviceGateway[Int(f.device)])),
        hour: hour)
      write(
        f.kind, line: line, message: batch.idJSON.withBytes(m) { Array($0) }, user: f.user,
        device: f.device, push: push, reason: f.reason, deliverAt: f.deliverAt)
    }
  }

  /// A push for a message no traffic line has.
  mutating func unknownMessage(_ push: SentPush) {
    tally.countSent(gateway: gatewayKey(push), hour: nil)
    tally.count(.unknownMessage, gateway: gatewayKey(push), hour: nil)
    write(
      .unknownMessage, line: nil, message: names[push.names]?.message ?? [], user: push.user,
      device: push.device, push: push, reason: nil, deliverAt: nil)
  }

  /// The first of `pairs` (in user row order) from `start` on whose user
  /// row is at least `u` (`pairs.upperBound` if none): a galloping search,
  /// so that a message's pushes cost about their number, not a binary
  /// search each, nor a walk over every pair of a large channel.
  private func firstPair(
    from start: Int, atLeast u: Int32, in pairs: Range<Int>, _ result: ChunkResult
  ) -> Int {
    guard start < pairs.upperBound, result.pairUsers[start] < u else { return start }
    // pairUsers[lo] < u; find hi with pairUsers[hi] >= u (or the end).
    var lo = start
    var step = 1
    var hi = start + 1
    while hi < pairs.upperBound && result.pairUsers[hi] < u {
      lo = hi
      step *= 2
      hi = min(pairs.upperBound, hi + step)
    }
    // The first at least u lies in (lo, hi].
    var low = lo + 1
    var high = hi
    while low < high {
      let mid = (low + high) / 2
      if result.pairUsers[mid] < u { low = mid + 1 } else { high = mid }
    }
    return low
  }

  /// The devices pair `p` is delivered to.
  private func devices(of p: Int, _ result: ChunkResult) -> ArraySlice<Int32> {
    let start = p == 0 ? 0 : Int(result.pairDeviceEnds[p - 1])
    return result.pairDevices[start..<Int(result.pairDeviceEnds[p])]
  }

  /// Their gateways' rows.
  private func gateways(of p: Int, _ result: ChunkResult) -> ArraySlice<UInt16> {
    let start = p == 0 ? 0 : Int(result.pairDeviceEnds[p - 1])
    return result.pairDeviceGateways[start..<Int(result.pairDeviceEnds[p])]
  }

  private func gatewayKey(_ push: SentPush) -> AuditTally.GatewayKey {
    if push.device >= 0 { return .row(Int(push.gateway)) }
    guard let gateway = names[push.names]?.gateway else { return .named("") }
    let row = gateway.withUnsafeBytes { JSONScanner.string(in: $0) }.flatMap { name in
      name.withUnsafeBytes { index.gateways.find($0) }
    }
    if let row { return .row(Int(row)) }
    return .named(String(decoding: gateway.dropFirst().dropLast(), as: UTF8.self))
  }

  /// One line of findings.ndjson.
  private mutating func write(
    _ kind: FindingKind, line: Int?, message: [UInt8], user: Int32, device: Int32,
    push: SentPush?, reason: String?, deliverAt: Int64?
  ) {
    lines += #"{"kind":""#.utf8
    lines += kind.name.utf8
    lines.append(UInt8(ascii: "\""))
    if let line {
      lines += #","line":"#.utf8
      JSONText.appendDecimal(Int64(line), to: &lines)
    }
    lines += #","message":"#.utf8
    lines += message
    lines += #","user":"#.utf8
    let pushNames = push.flatMap { names[$0.names] }
    let userJSON = user >= 0 ? Array(index.userJSON[Int(user)]) : pushNames?.user ?? []
    lines += userJSON
    if device >= 0 {
      let d = Int(device)
      lines += #","gateway":"#.utf8
      lines += index.gatewayJSON[Int(index.deviceGateway[d])]
      lines += #","token":"#.utf8
      index.deviceJSON.withBytes(d) { Self.appendToken(of: $0, to: &lines) }
      lines += #","device":"#.utf8
      JSONText.appendDecimal(index.deviceIDs[d], to: &lines)
    } else if let names = pushNames {
      if let gateway = names.gateway {
        lines += #","gateway":"#.utf8
        lines += gateway
      }
      if let token = names.token {
        lines += #","token":"#.utf8
        lines += token
      }
      if let id = names.deviceID {
        lines += #","device":"#.utf8
        JSONText.appendDecimal(id, to: &lines)
      }
    }
    if let reason {
      lines += #","reason":""#.utf8
      lines += reason.utf8
      lines.append(UInt8(ascii: "\""))
    }
    if let deliverAt {
      lines += #","deliver_at":"#.utf8
      JSONText.appendDecimal(deliverAt, to: &lines)
    }
    if let sentAt = push?.sentAt {
      lines += #","sent_at":"#.utf8
      JSONText.appendDecimal(sentAt, to: &lines)
    }
    // JSON escapes byte by byte: the strings below are written in pieces.
    if let push {
      lines += #","log":"#.utf8
      lines += logPrefixes[Int(push.file)]
      JSONText.appendDecimal(Int64(push.logLine), to: &lines)
      lines.append(UInt8(ascii: "\""))
    }
    if line != nil {
      lines += #","explain":"#.utf8
      lines += explainPrefix
      lines += " --id ".utf8
      Self.appendShellWord(quoted: message, to: &lines)
      lines += " --user ".utf8
      Self.appendShellWord(quoted: userJSON, to: &lines)
      lines.append(UInt8(ascii: "\""))
    }
    lines += "}\n".utf8
    if tally.examples[kind.rawValue].count < AuditTally.examplesPerKind {
      let id = Self.decoded(message)
      let who = Self.decoded(userJSON)
      let explain =
        line == nil
        ? nil
        : explainCommand + " --id " + ShellWord.quoted(id) + " --user " + ShellWord.quoted(who)
      let gateway =
        device >= 0
        ? index.gateways[Int(index.deviceGateway[Int(device)])]
        : pushNames?.gateway.map(Self.decoded)
      tally.examples[kind.rawValue].append(
        AuditTally.Example(
          message: id, user: who, gateway: gateway, reason: reason, explain: explain))
    }
  }

  /// Appends the quoted token at the end of a device's JSON fragment
  /// (after the first `,"token":`, which no quoted string can hold).
  static func appendToken(of fragment: UnsafeRawBufferPointer, to out: inout [UInt8]) {
    let marker = StaticString(#","token":"#)
    let m = marker.utf8CodeUnitCount
    var k = 0
    while k + m <= fragment.count {
      if fragment[k] == UInt8(ascii: ","),
        memcmp(fragment.baseAddress! + k, marker.utf8Start, m) == 0
      {
        out.append(contentsOf: UnsafeRawBufferPointer(rebasing: fragment[(k + m)...]))
        return
      }
      k += 1
    }
  }

  /// Appends a JSON string `quoted` as the body of a JSON string holding
  /// it as one shell word (`ShellWord.quoted`). Ids are mostly plain, and
  /// then both quotings leave them as they are.
  static func appendShellWord(quoted: [UInt8], to out: inout [UInt8]) {
    let inner = quoted.dropFirst().dropLast()
    let plain = ShellWord.isPlain(inner)
    if plain {
      out += inner
    } else {
      out += JSONText.quoted(ShellWord.quoted(decoded(quoted))).dropFirst().dropLast()
    }
  }

  static func decoded(_ quoted: [UInt8]) -> String {
    String(decoding: quoted.withUnsafeBytes { JSONScanner.string(in: $0) } ?? [], as: UTF8.self)
  }

  /// Whether instant `a` is more than `tolerance` ms after `b`, over all of
  /// Int64 (their difference may not fit in it: then it is more).
  static func isMore(_ a: Int64, than tolerance: Int64, after b: Int64) -> Bool {
    guard a > b else { return false }
    let (difference, overflow) = a.subtractingReportingOverflow(b)
    return overflow || difference > tolerance
  }
}
