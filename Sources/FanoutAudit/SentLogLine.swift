import CPrefetch
import FanoutIndex
import FanoutModel
import FanoutTraffic
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// One push a sent log says went out, resolved against the index: which
/// user row, which of that user's devices, when.
struct SentPush {
  /// The traffic line it answers: once parsed, its message id's first
  /// line; once placed, the line it is matched with (see `SentLogs`).
  var line = 0
  /// The message id as a JSON string, hashed to find its line.
  var idHash: UInt64 = 0
  /// User row, or -1 when the snapshot has no such user.
  var user: Int32 = -1
  /// The user's device the log names (by token or device id, on the named
  /// gateway), or -1 when the user has no such device; and its gateway row.
  var device: Int32 = -1
  var gateway: Int32 = -1
  /// The time the push was sent, when the log says.
  var sentAt: Int64? = nil
  /// Where the log says it: file (in command-line order) and line.
  var file: Int32 = 0
  var logLine: Int = 0
  /// What the log named, as JSON strings, kept only where the index cannot
  /// give it back (an unknown user, device or message).
  /// Its place in the logs' `PushNames`, or -1: a push is plain data.
  var names: Int32 = -1

  struct Names: Sendable {
    var message: [UInt8] = []
    var user: [UInt8] = []
    var gateway: [UInt8]? = nil
    var token: [UInt8]? = nil
    var deviceID: Int64? = nil
  }
}

/// What pushes named, as JSON strings, where the index cannot give it back
/// (an unknown user, device or message): few, kept aside for their
/// findings, and added to from every core.
final class PushNames: Sendable {
  private let all = Mutex<[SentPush.Names]>([])

  func add(_ names: SentPush.Names) -> Int32 {
    all.withLock {
      $0.append(names)
      return Int32($0.count - 1)
    }
  }

  func update(_ i: Int32, _ body: (inout SentPush.Names) -> Void) {
    all.withLock { body(&$0[Int(i)]) }
  }

  /// Names `i`, or nil for -1.
  subscript(i: Int32) -> SentPush.Names? { i < 0 ? nil : all.withLock { $0[Int(i)] } }
}

/// A chunk of a sent log's lines, parsed: its pushes in log order, and
/// beside each what it names, until `resolve(against:)` finds its user and
/// device — a batch at a time, so that the index's cache misses overlap.
struct PushBatch {
  var pushes: [SentPush] = []
  /// Per push: the user named (decoded).
  fileprivate var users = BytePool.Builder()
  /// Per push: the token named, quoted, or nothing when it names a device id.
  fileprivate var tokens = BytePool.Builder()
  /// Per push: the gateway named, quoted, or nothing.
  fileprivate var gatewayNames = BytePool.Builder()
  /// Per push: the gateway's row; -1 when none is named, -2 when the
  /// snapshot has no such gateway.
  fileprivate var gateways: [Int32] = []
  fileprivate var deviceIDs: [Int64?] = []

  var count: Int { pushes.count }

  /// Drops the pushes from the `n`th on (those of a line found unreadable
  /// half way).
  fileprivate mutating func removeLast(from n: Int) {
    pushes.removeSubrange(n...)
    users.removeLast(from: n)
    tokens.removeLast(from: n)
    gatewayNames.removeLast(from: n)
    gateways.removeSubrange(n...)
    deviceIDs.removeSubrange(n...)
  }

  /// Finds each push's user row, and the device among that user's that it
  /// names (by token on the gateway named, else by device id); what the
  /// index cannot give back is kept in the push's `names`. In groups of
  /// pushes, each step asks for the cache lines the next step reads.
  mutating func resolve(against index: Index, keepingNames store: PushNames) {
    var rows: [Int32] = []
    index.users.find(batch: users, into: &rows)
    let userDevices = index.userDevices.buffer
    let deviceGateway = index.deviceGateway.buffer
    let deviceIDColumn = index.deviceIDs.buffer
    let offsets = index.deviceJSON.offsets.buffer
    let fragments = index.deviceJSON.bytes.buffer
    let group = 64
    for start in stride(from: 0, to: count, by: group) {
      let end = min(start + group, count)
      for k in start..<end where rows[k] >= 0 {
        cprefetch_read(userDevices.baseAddress! + Int(rows[k]))
      }
      for k in start..<end where rows[k] >= 0 {
        let first = Int(userDevices[Int(rows[k])])
        cprefetch_read(deviceGateway.baseAddress! + first)
        if isByToken(k) {
          cprefetch_read(offsets.baseAddress! + first)
        } else {
          cprefetch_read(deviceIDColumn.baseAddress! + first)
        }
      }
      for k in start..<end where rows[k] >= 0 && isByToken(k) {
        let u = Int(rows[k])
        let bytes = offsets[Int(userDevices[u])]..<offsets[Int(userDevices[u + 1])]
        for line in stride(from: bytes.lowerBound, to: bytes.upperBound, by: 64) {
          cprefetch_read(fragments.baseAddress! + line)
        }
      }
      for k in start..<end {
        pushes[k].user = rows[k]
        if rows[k] >= 0 && gateways[k] != -2 {
          let u = Int(rows[k])
          for d in Int(userDevices[u])..<Int(userDevices[u + 1]) {
            if gateways[k] >= 0 && Int32(deviceGateway[d]) != gateways[k] { continue }
            let found =
              isByToken(k)
              ? tokens.withBytes(k) { quoted in
                Self.endsWithToken(
                  UnsafeRawBufferPointer(
                    rebasing: UnsafeRawBufferPointer(fragments)[offsets[d]..<offsets[d + 1]]),
                  quoted)
              }
              : deviceIDColumn[d] == deviceIDs[k]
            if found {
              pushes[k].device = Int32(d)
              pushes[k].gateway = Int32(deviceGateway[d])
              break
            }
          }
        }
        if pushes[k].device < 0 { pushes[k].names = store.add(names(k)) }
      }
    }
  }

  private func isByToken(_ k: Int) -> Bool { tokens.withBytes(k) { !$0.isEmpty } }

  /// What push `k` named, for a finding about a user or device the index
  /// does not have.
  private func names(_ k: Int) -> SentPush.Names {
    var names = SentPush.Names()
    users.withBytes(k) { JSONText.appendQuoted($0, to: &names.user) }
    gatewayNames.withBytes(k) { if !$0.isEmpty { names.gateway = Array($0) } }
    tokens.withBytes(k) { if !$0.isEmpty { names.token = Array($0) } }
    names.deviceID = deviceIDs[k]
    return names
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
    return sameBytes(fragment.baseAddress! + fragment.count - n, quoted.baseAddress!, n)
      && sameBytes(fragment.baseAddress! + fragment.count - n - m, marker.utf8Start, m)
  }
}

/// Parses the lines of a sent log into a `PushBatch`. Two shapes are read:
/// a push per line, `{"message":"m1","user":"u2","gateway":"apns",
/// "token":"…","sent_at":1763719200450}` (`device`, a device id, instead
/// of `token`; `gateway` and `sent_at` optional), and Fanout's own gateway
/// files, a message per line with its `recipients` (each sent at its
/// `sent_at`, else its `deliver_at`, else the line's `ts`).
struct SentLogParser {
  let gatewayTable: StringTable
  private var key: [UInt8] = []
  /// Each string field's bytes decoded, and quoted as the index quotes
  /// (reused from line to line: nothing is allocated for a known push).
  /// The message id of the line at hand, quoted.
  private(set) var messageQuoted: [UInt8] = []
  /// The id last hashed, and its hash: a log with a push per line repeats
  /// a message's id line after line, hashed once.
  private var hashedQuoted: [UInt8] = []
  private var hash: UInt64 = 0
  private var field = StringField()
  private var entries: [Fields] = []

  init(index: Index) { gatewayTable = index.gateways }

  struct Failure: Error { let reason: String }

  /// Appends the pushes of one line (none for a gateway line without
  /// recipients) to `batch`, each with the hash of its message id quoted;
  /// on failure, `batch` is left as it was.
  mutating func parse(
    _ line: UnsafeRawBufferPointer, file: Int32, number: Int, into batch: inout PushBatch
  ) throws(Failure) {
    // (Fields keeps offsets in 32 bits.)
    guard line.count < Int(UInt32.max) else { throw Failure(reason: "line longer than 4 GiB") }
    var fields = Fields()
    var scanner = JSONScanner(line)
    // Whether `entries` holds the recipients' fields, read in the one pass.
    var entriesRead = false
    var topKey: [UInt8] = []  // (used only for a key with escapes)
    do throws(JSONScanner.Failure) {
      try scanner.object(key: &topKey) {
        (key, scanner: inout JSONScanner) throws(JSONScanner.Failure) in
        let start = scanner.i
        if Fields.named(key, "recipients") && scanner.peek == UInt8(ascii: "[") {
          entriesRead = readEntries(&scanner)
          if !entriesRead {
            // Read again for the syntax error, if any; else `readRecipients`
            // names what is wrong.
            scanner.i = start
            try scanner.value(depth: 1)
          }
        } else {
          try scanner.value(depth: 1)
          // A later `recipients` that is no array (null aside) leaves the
          // entries of an earlier one unread: the last one counts.
          if Fields.named(key, "recipients") && line[start] != UInt8(ascii: "n") {
            entriesRead = false
          }
        }
        fields.note(key, start..<scanner.i, in: line)
      }
      scanner.skipWhitespace()
      guard scanner.peek == nil else { throw scanner.fail("text after the object") }
    } catch {
      throw Failure(reason: error.reason)
    }
    guard let id = fields[.message] else { throw Failure(reason: "missing field 'message'") }
    messageQuoted.removeAll(keepingCapacity: true)
    if let plain = try plainString(line, id, "message", quoted: true) {
      messageQuoted.append(contentsOf: plain)
    } else {
      messageQuoted += field.quoted
    }
    if messageQuoted != hashedQuoted {
      hash = messageQuoted.withUnsafeBytes { XXH64.hash($0, seed: 0) }
      hashedQuoted.removeAll(keepingCapacity: true)
      hashedQuoted += messageQuoted
    }
    let idHash = hash
    let mark = batch.count
    do throws(Failure) {
      if let recipients = fields[.recipients] {
        let ts = try fields[.ts].map { (r) throws(Failure) in try Self.integer(line, r, "ts") }
        if !entriesRead { try readRecipients(line, recipients) }
        for entry in entries {
          try append(line, entry, what: "a recipient", into: &batch)
          if batch.pushes[batch.count - 1].sentAt == nil, let deliverAt = entry[.deliverAt] {
            batch.pushes[batch.count - 1].sentAt = try Self.integer(line, deliverAt, "deliver_at")
          }
          if batch.pushes[batch.count - 1].sentAt == nil {
            batch.pushes[batch.count - 1].sentAt = ts
          }
        }
      } else {
        try append(line, fields, what: "the line", into: &batch)
      }
    } catch {
      batch.removeLast(from: mark)
      throw error
    }
    for k in mark..<batch.count {
      batch.pushes[k].idHash = idHash
      batch.pushes[k].file = file
      batch.pushes[k].logLine = number
    }
  }

  /// Reads an array of objects at `scanner` into `entries`, leaving the
  /// scanner after it; false (the scanner anywhere) when it is not one.
  private mutating func readEntries(_ scanner: inout JSONScanner) -> Bool {
    entries.removeAll(keepingCapacity: true)
    let line = scanner.bytes
    do throws(JSONScanner.Failure) {
      try scanner.expect(UInt8(ascii: "["))
      scanner.skipWhitespace()
      if scanner.peek == UInt8(ascii: "]") {
        scanner.i += 1
        return true
      }
      while true {
        scanner.skipWhitespace()
        var entry = Fields()
        try scanner.object(key: &key) { key, range in entry.note(key, range, in: line) }
        entries.append(entry)
        scanner.skipWhitespace()
        if scanner.peek == UInt8(ascii: ",") {
          scanner.i += 1
          continue
        }
        try scanner.expect(UInt8(ascii: "]"))
        return true
      }
    } catch {
      return false
    }
  }

  /// The fields of each object of the array at `range`, into `entries`.
  private mutating func readRecipients(_ line: UnsafeRawBufferPointer, _ range: Range<Int>)
    throws(Failure)
  {
    entries.removeAll(keepingCapacity: true)
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
    if list.peek == UInt8(ascii: "]") { return }
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
      return
    }
  }

  /// Appends one push from its fields: what it names, checked, for
  /// `PushBatch.resolve` to look up.
  private mutating func append(
    _ line: UnsafeRawBufferPointer, _ fields: Fields, what: String, into batch: inout PushBatch
  ) throws(Failure) {
    guard let userRange = fields[.user] else {
      throw Failure(reason: "missing field 'user' (\(what))")
    }
    let mark = batch.count
    do throws(Failure) {
      try appendString(line, userRange, "user", quoted: false, to: &batch.users)
      if let range = fields[.gateway] {
        try appendString(line, range, "gateway", quoted: true, to: &batch.gatewayNames)
        let row =
          field.wasPlain
          ? gatewayTable.find(
            UnsafeRawBufferPointer(rebasing: line[(range.lowerBound + 1)..<(range.upperBound - 1)]))
          : field.decoded.withUnsafeBytes { gatewayTable.find($0) }
        batch.gateways.append(row ?? -2)
      } else {
        batch.gateways.append(-1)
        batch.gatewayNames.append(UnsafeRawBufferPointer(start: nil, count: 0))
      }
      if let range = fields[.token] {
        try appendString(line, range, "token", quoted: true, to: &batch.tokens)
      } else {
        batch.tokens.append(UnsafeRawBufferPointer(start: nil, count: 0))
      }
      let deviceID = try fields[.device].map { (r) throws(Failure) in
        try Self.integer(line, r, "device")
      }
      batch.deviceIDs.append(deviceID)
      guard fields[.token] != nil || deviceID != nil else {
        throw Failure(reason: "needs 'token' or 'device' (\(what))")
      }
      var push = SentPush()
      push.sentAt = try fields[.sentAt].map { (r) throws(Failure) in
        try Self.integer(line, r, "sent_at")
      }
      batch.pushes.append(push)
    } catch {
      batch.removeLast(from: mark)
      throw error
    }
  }

  /// Appends string field `name`'s value at `range` to `pool`, decoded or
  /// quoted canonically (as the index and the traffic parser quote), so
  /// that equal strings have equal bytes. A value without a backslash is
  /// both already, give or take its quotes, and is copied as it lies;
  /// one with is decoded in `field` (`field.wasPlain` says which).
  private mutating func appendString(
    _ line: UnsafeRawBufferPointer, _ range: Range<Int>, _ name: String, quoted: Bool,
    to pool: inout BytePool.Builder
  ) throws(Failure) {
    if let plain = try plainString(line, range, name, quoted: quoted) {
      pool.append(plain)
    } else {
      (quoted ? field.quoted : field.decoded).withUnsafeBytes { pool.append($0) }
    }
  }

  /// The value at `range` as it lies (quoted or not), when it has no
  /// backslash; else nil, with the value decoded and quoted in `field`.
  private mutating func plainString(
    _ line: UnsafeRawBufferPointer, _ range: Range<Int>, _ name: String, quoted: Bool
  ) throws(Failure) -> UnsafeRawBufferPointer? {
    guard line[range.lowerBound] == UInt8(ascii: "\"") else {
      throw Failure(reason: "field '\(name)' is not a string")
    }
    let inner = UnsafeRawBufferPointer(
      rebasing: line[(range.lowerBound + 1)..<(range.upperBound - 1)])
    if inner.isEmpty || memchr(inner.baseAddress!, 0x5C, inner.count) == nil {
      field.wasPlain = true
      return quoted ? UnsafeRawBufferPointer(rebasing: line[range]) : inner
    }
    try field.read(line, range, name)
    field.wasPlain = false
    return nil
  }

  /// A string field's value: decoded, and quoted canonically (as the index
  /// and the traffic parser quote), so that equal strings have equal bytes.
  /// A value without a backslash is both already, give or take its quotes.
  struct StringField {
    var decoded: [UInt8] = []
    var quoted: [UInt8] = []
    /// Whether the last value asked for had no escape (and was not read here).
    var wasPlain = true

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
  private static func integer(
    _ line: UnsafeRawBufferPointer, _ range: Range<Int>, _ name: String
  )
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
    enum Name: Int {
      case message, user, gateway, token, device, sentAt, deliverAt, ts, recipients
    }

    /// Each field's value as `start << 32 | end`, 0 when absent (no value
    /// ends at 0): 72 bytes, copied for every recipient.
    private var spans = InlineArray<9, UInt64>(repeating: 0)

    @inline(__always)
    subscript(_ name: Name) -> Range<Int>? {
      get {
        let span = spans[name.rawValue]
        return span == 0 ? nil : Int(span >> 32)..<Int(span & 0xFFFF_FFFF)
      }
      set {
        spans[name.rawValue] =
          newValue.map { UInt64($0.lowerBound) << 32 | UInt64($0.upperBound) } ?? 0
      }
    }

    static func named(_ key: UnsafeRawBufferPointer, _ name: StaticString) -> Bool {
      key.count == name.utf8CodeUnitCount
        && (key.isEmpty || memcmp(key.baseAddress!, name.utf8Start, key.count) == 0)
    }

    mutating func note(
      _ key: UnsafeRawBufferPointer, _ range: Range<Int>, in line: UnsafeRawBufferPointer
    ) {
      guard line[range.lowerBound] != UInt8(ascii: "n") else { return }
      func named(_ name: StaticString) -> Bool { Self.named(key, name) }
      switch key.count {
      case 2: if named("ts") { self[.ts] = range }
      case 4: if named("user") { self[.user] = range }
      case 5: if named("token") { self[.token] = range }
      case 6: if named("device") { self[.device] = range }
      case 7:
        if named("message") {
          self[.message] = range
        } else if named("gateway") {
          self[.gateway] = range
        } else if named("sent_at") {
          self[.sentAt] = range
        }
      case 10:
        if named("deliver_at") {
          self[.deliverAt] = range
        } else if named("recipients") {
          self[.recipients] = range
        }
      default: break
      }
    }
  }
}
