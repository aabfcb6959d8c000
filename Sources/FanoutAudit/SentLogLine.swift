import FanoutIndex
import FanoutModel
import FanoutTraffic

#if canImport(Glibc)
  import Glibc
#endif

/// One push a sent log says went out, resolved against the index: which
/// user row, which of that user's devices, when.
struct SentPush {
  /// The traffic line it answers (0 until placed; see `SentLogs`).
  var line = 0
  /// The message id as a JSON string, hashed to find its line.
  var idHash: UInt64 = 0
  /// User row, or -1 when the snapshot has no such user.
  var user: Int32 = -1
  /// The user's device the log names (by token or device id, on the named
  /// gateway), or -1 when the user has no such device.
  var device: Int32 = -1
  /// The time the push was sent, when the log says.
  var sentAt: Int64? = nil
  /// Where the log says it: file (in command-line order) and line.
  var file: Int32 = 0
  var logLine: Int = 0
  /// What the log named, as JSON strings, kept only where the index cannot
  /// give it back (an unknown user, device or message).
  var names: Names? = nil

  final class Names {
    var message: [UInt8] = []
    var user: [UInt8] = []
    var gateway: [UInt8]? = nil
    var token: [UInt8]? = nil
    var deviceID: Int64? = nil
  }
}

/// Parses the lines of a sent log into `SentPush`es. Two shapes are read:
/// a push per line, `{"message":"m1","user":"u2","gateway":"apns",
/// "token":"…","sent_at":1763719200450}` (`device`, a device id, instead
/// of `token`; `gateway` and `sent_at` optional), and Fanout's own gateway
/// files, a message per line with its `recipients` (each sent at its
/// `sent_at`, else its `deliver_at`, else the line's `ts`).
struct SentLogParser {
  let index: Index
  private var key: [UInt8] = []
  /// Each string field's bytes decoded, and quoted as the index quotes
  /// (reused from line to line: nothing is allocated for a known push).
  private var message = StringField()
  private var user = StringField()
  private var gateway = StringField()
  private var token = StringField()

  init(index: Index) { self.index = index }

  struct Failure: Error { let reason: String }

  /// The pushes of one line (none for a gateway line without recipients),
  /// with the hash of the message id quoted, and the id itself.
  mutating func parse(_ line: UnsafeRawBufferPointer, file: Int32, number: Int) throws(Failure)
    -> [SentPush]
  {
    var fields = Fields()
    var scanner = JSONScanner(line)
    do throws(JSONScanner.Failure) {
      try scanner.object(key: &key) { key, range in fields.note(key, range, in: line) }
      scanner.skipWhitespace()
      guard scanner.peek == nil else { throw scanner.fail("text after the object") }
    } catch {
      throw Failure(reason: error.reason)
    }
    guard let id = fields.message else { throw Failure(reason: "missing field 'message'") }
    try message.read(line, id, "message")
    let idHash = message.quoted.withUnsafeBytes { XXH64.hash($0, seed: 0) }
    var pushes: [SentPush] = []
    if let recipients = fields.recipients {
      let ts = try fields.ts.map { (r) throws(Failure) in try integer(line, r, "ts") }
      for entry in try recipientFields(line, recipients) {
        var push = try resolve(line, entry, what: "a recipient")
        if push.sentAt == nil, let deliverAt = entry.deliverAt {
          push.sentAt = try integer(line, deliverAt, "deliver_at")
        }
        push.sentAt = push.sentAt ?? ts
        pushes.append(push)
      }
    } else {
      pushes.append(try resolve(line, fields, what: "the line"))
    }
    for k in pushes.indices {
      pushes[k].idHash = idHash
      pushes[k].file = file
      pushes[k].logLine = number
      pushes[k].names?.message = message.quoted
    }
    return pushes
  }

  /// The message id of the line last parsed, quoted.
  var messageQuoted: [UInt8] { message.quoted }

  /// The fields of each object of the array at `range`.
  private mutating func recipientFields(_ line: UnsafeRawBufferPointer, _ range: Range<Int>)
    throws(Failure) -> [Fields]
  {
    var entries: [Fields] = []
    var list = JSONScanner(line)
    list.i = range.lowerBound
    func failed(_ error: JSONScanner.Failure) -> Failure {
      Failure(reason: "'recipients': \(error.reason)")
    }
    guard list.peek == UInt8(ascii: "[") else {
      throw Failure(reason: "field 'recipients' is not an array")
    }
    list.i += 1
    list.skipWhitespace()
    if list.peek == UInt8(ascii: "]") { return [] }
    while true {
      list.skipWhitespace()
      var entry = Fields()
      do {
        try list.object(key: &key) { key, range in entry.note(key, range, in: line) }
      } catch { throw failed(error) }
      entries.append(entry)
      list.skipWhitespace()
      if list.peek == UInt8(ascii: ",") {
        list.i += 1
        continue
      }
      do { try list.expect(UInt8(ascii: "]")) } catch { throw failed(error) }
      return entries
    }
  }

  /// One push from its fields: the user, the device by token or id.
  private mutating func resolve(
    _ line: UnsafeRawBufferPointer, _ fields: Fields, what: String
  ) throws(Failure) -> SentPush {
    var push = SentPush()
    guard let userRange = fields.user else {
      throw Failure(reason: "missing field 'user' (\(what))")
    }
    try user.read(line, userRange, "user")
    // nil: no gateway named; -2: one the snapshot does not have.
    var gatewayRow: Int32? = nil
    if let range = fields.gateway {
      try gateway.read(line, range, "gateway")
      gatewayRow = gateway.decoded.withUnsafeBytes { index.gateways.find($0) } ?? -2
    }
    if let range = fields.token { try token.read(line, range, "token") }
    let deviceID = try fields.device.map { (r) throws(Failure) in try integer(line, r, "device") }
    guard fields.token != nil || deviceID != nil else {
      throw Failure(reason: "needs 'token' or 'device' (\(what))")
    }
    push.sentAt = try fields.sentAt.map { (r) throws(Failure) in try integer(line, r, "sent_at") }
    push.user = user.decoded.withUnsafeBytes { index.users.find($0) } ?? -1
    if push.user >= 0 && gatewayRow != -2 {
      push.device = device(
        of: Int(push.user), gateway: gatewayRow, byToken: fields.token != nil, id: deviceID)
    }
    if push.device < 0 {
      let names = SentPush.Names()
      names.user = user.quoted
      names.gateway = fields.gateway == nil ? nil : gateway.quoted
      names.token = fields.token == nil ? nil : token.quoted
      names.deviceID = deviceID
      push.names = names
    }
    return push
  }

  /// The device of user `u` with the token just read (else with device id
  /// `id`), on `gateway` when the log names one; -1 if none.
  private func device(of u: Int, gateway: Int32?, byToken: Bool, id: Int64?) -> Int32 {
    let devices = Int(index.userDevices[u])..<Int(index.userDevices[u + 1])
    for d in devices {
      if let gateway, Int32(index.deviceGateway[d]) != gateway { continue }
      let found =
        byToken
        ? token.quoted.withUnsafeBytes { quoted in
          index.deviceJSON.withBytes(d) { Self.endsWithToken($0, quoted) }
        }
        : index.deviceIDs[d] == id
      if found { return Int32(d) }
    }
    return -1
  }

  /// Whether a device's JSON fragment, which ends with `,"token":` and its
  /// quoted token, ends with the token `quoted`.
  static func endsWithToken(_ fragment: UnsafeRawBufferPointer, _ quoted: UnsafeRawBufferPointer)
    -> Bool
  {
    let marker = StaticString(#","token":"#)
    let n = quoted.count
    let m = marker.utf8CodeUnitCount
    guard fragment.count >= n + m else { return false }
    return memcmp(fragment.baseAddress! + fragment.count - n, quoted.baseAddress!, n) == 0
      && memcmp(fragment.baseAddress! + fragment.count - n - m, marker.utf8Start, m) == 0
  }

  /// A string field's value: decoded, and quoted canonically (as the index
  /// and the traffic parser quote), so that equal strings have equal bytes.
  /// A value without a backslash is both already, give or take its quotes.
  struct StringField {
    var decoded: [UInt8] = []
    var quoted: [UInt8] = []

    mutating func read(_ line: UnsafeRawBufferPointer, _ range: Range<Int>, _ name: String)
      throws(Failure)
    {
      guard line[range.lowerBound] == UInt8(ascii: "\"") else {
        throw Failure(reason: "field '\(name)' is not a string")
      }
      decoded.removeAll(keepingCapacity: true)
      quoted.removeAll(keepingCapacity: true)
      let inner = UnsafeRawBufferPointer(
        rebasing: line[(range.lowerBound + 1)..<(range.upperBound - 1)])
      if !inner.contains(UInt8(ascii: "\\")) {
        decoded.append(contentsOf: inner)
        quoted.append(contentsOf: UnsafeRawBufferPointer(rebasing: line[range]))
        return
      }
      var scanner = JSONScanner(line)
      scanner.i = range.lowerBound
      do { try scanner.string(into: &decoded) } catch { throw Failure(reason: error.reason) }
      decoded.withUnsafeBytes { JSONText.appendQuoted($0, to: &quoted) }
    }
  }

  /// An integer field (no fraction or exponent), without overflow.
  private func integer(_ line: UnsafeRawBufferPointer, _ range: Range<Int>, _ name: String)
    throws(Failure) -> Int64
  {
    var value: Int64 = 0
    var k = range.lowerBound
    let negative = line[k] == UInt8(ascii: "-")
    if negative { k += 1 }
    guard k < range.upperBound else { throw Failure(reason: "field '\(name)' is not an integer") }
    while k < range.upperBound {
      let digit = line[k] &- 0x30
      guard digit < 10 else { throw Failure(reason: "field '\(name)' is not an integer") }
      let (times, o1) = value.multipliedReportingOverflow(by: 10)
      let (sum, o2) =
        negative
        ? times.subtractingReportingOverflow(Int64(digit))
        : times.addingReportingOverflow(Int64(digit))
      guard !o1 && !o2 else { throw Failure(reason: "field '\(name)' is out of range") }
      value = sum
      k += 1
    }
    return value
  }

  /// Where each known field's value lies in the line; JSON null is absent.
  struct Fields {
    var message: Range<Int>?
    var user: Range<Int>?
    var gateway: Range<Int>?
    var token: Range<Int>?
    var device: Range<Int>?
    var sentAt: Range<Int>?
    var deliverAt: Range<Int>?
    var ts: Range<Int>?
    var recipients: Range<Int>?

    static let names: [[UInt8]] = [
      "message", "user", "gateway", "token", "device", "sent_at", "deliver_at", "ts", "recipients",
    ].map { Array($0.utf8) }

    mutating func note(_ key: [UInt8], _ range: Range<Int>, in line: UnsafeRawBufferPointer) {
      guard line[range.lowerBound] != UInt8(ascii: "n"),
        let field = Self.names.firstIndex(of: key)
      else { return }
      switch field {
      case 0: message = range
      case 1: user = range
      case 2: gateway = range
      case 3: token = range
      case 4: device = range
      case 5: sentAt = range
      case 6: deliverAt = range
      case 7: ts = range
      default: recipients = range
      }
    }
  }
}
