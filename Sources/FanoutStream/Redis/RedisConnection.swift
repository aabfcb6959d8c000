import CRedis

#if canImport(Glibc)
  import Glibc
#endif

/// Where a Redis server is: `redis://[user@]host[:port]` (an IPv6 host in
/// brackets) or `unix:///path`, each with an optional `?db=N`. The user is
/// an ACL user, authenticated with the password given apart.
public struct RedisAddress: Sendable, Equatable, CustomStringConvertible {
  public enum Endpoint: Sendable, Equatable {
    case tcp(host: String, port: Int)
    case unix(path: String)
  }

  public let endpoint: Endpoint
  public let database: Int
  /// The ACL user to authenticate as (nil: the default user).
  public let user: String?
  public let text: String

  public init?(_ url: String) {
    text = url
    var rest = Substring(url)
    var database = 0
    if let q = rest.firstIndex(of: "?") {
      let query = rest[rest.index(after: q)...]
      rest = rest[..<q]
      guard query.hasPrefix("db="), let n = Int(query.dropFirst(3)), n >= 0 else { return nil }
      database = n
    }
    self.database = database
    var user: String? = nil
    if rest.hasPrefix("unix://") {
      let path = rest.dropFirst("unix://".count)
      guard path.hasPrefix("/") else { return nil }
      endpoint = .unix(path: String(path))
    } else if rest.hasPrefix("redis://") {
      var hostPort = rest.dropFirst("redis://".count)
      if hostPort.hasSuffix("/") { hostPort = hostPort.dropLast() }
      if let at = hostPort.lastIndex(of: "@") {
        guard at > hostPort.startIndex else { return nil }
        user = String(hostPort[..<at])
        hostPort = hostPort[hostPort.index(after: at)...]
      }
      let host: Substring
      var portText: Substring? = nil
      if hostPort.hasPrefix("[") {
        guard let close = hostPort.firstIndex(of: "]") else { return nil }
        host = hostPort[hostPort.index(after: hostPort.startIndex)..<close]
        let after = hostPort[hostPort.index(after: close)...]
        if !after.isEmpty {
          guard after.hasPrefix(":") else { return nil }
          portText = after.dropFirst()
        }
      } else {
        let parts = hostPort.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count <= 2 else { return nil }
        host = parts[0]
        portText = parts.count == 2 ? parts[1] : nil
      }
      guard !host.isEmpty else { return nil }
      let port = portText.map { Int($0) } ?? 6379
      guard let port, (1...65535).contains(port) else { return nil }
      endpoint = .tcp(host: String(host), port: port)
    } else {
      return nil
    }
    self.user = user
  }

  public var description: String { text }
}

/// A failed Redis call: the connection broke (worth reconnecting), or the
/// server answered with an error.
public enum RedisError: Error, CustomStringConvertible {
  case connection(String)
  /// The server refused a command (of the setup, or a batch's transaction).
  case reply(String)
  /// The server refused to read the input stream, and retrying cannot help.
  case input(String)

  /// The server's error reply `message`: a refusal, or — when the server
  /// says it cannot answer yet (still loading its data after a restart, a
  /// script running, a replica without its master) — as transient as a
  /// lost connection: nothing of the command was applied, and the stage
  /// retries with backoff.
  static func refusal(_ message: String) -> RedisError {
    let transient = ["LOADING", "BUSY ", "MASTERDOWN", "TRYAGAIN"]
    return transient.contains { message.hasPrefix($0) }
      ? .connection("Redis is not ready: \(message)") : .reply(message)
  }

  public var description: String {
    switch self {
    case .connection(let reason): reason
    case .reply(let message): "Redis replied: \(message)"
    case .input(let message): "Redis refused to read the input: \(message)"
    }
  }
}

/// A decoded reply. Bulk strings stay bytes: entry ids and fields are
/// copied once, never turned into `String`s on the hot path.
public indirect enum RedisReply: Sendable {
  case bytes([UInt8])
  case status(String)
  case integer(Int64)
  case array([RedisReply])
  case null
  case error(String)

  var array: [RedisReply]? { if case .array(let a) = self { a } else { nil } }
  var bytes: [UInt8]? { if case .bytes(let b) = self { b } else { nil } }
  var integer: Int64? { if case .integer(let i) = self { i } else { nil } }
}

/// One connection to Redis (hiredis, blocking), closed when released. Not
/// for sharing between threads.
public final class RedisConnection {
  private let context: UnsafeMutablePointer<redisContext>
  public let address: RedisAddress

  /// Connects, authenticates with `password` (if any) and selects the database.
  public init(_ address: RedisAddress, password: String?, timeoutMilliseconds: Int)
    throws(RedisError)
  {
    self.address = address
    let made: UnsafeMutablePointer<redisContext>? =
      switch address.endpoint {
      case .tcp(let host, let port): credis_connect_tcp(host, Int32(port), timeoutMilliseconds)
      case .unix(let path): credis_connect_unix(path, timeoutMilliseconds)
      }
    guard let made else { throw .connection("cannot connect: no memory for a Redis context") }
    guard credis_err(made) == 0 else {
      let reason = String(cString: credis_errstr(made))
      redisFree(made)
      throw .connection("cannot connect to \(address): \(reason)")
    }
    context = made
    _ = credis_set_timeout_ms(context, timeoutMilliseconds)
    if password != nil || address.user != nil {
      _ = try check(command(["AUTH"] + (address.user.map { [$0] } ?? []) + [password ?? ""]))
    }
    if address.database != 0 { _ = try check(command(["SELECT", "\(address.database)"])) }
  }

  deinit { redisFree(context) }

  /// How long a reply may take before the connection counts as lost.
  public func setTimeout(milliseconds: Int) { _ = credis_set_timeout_ms(context, milliseconds) }

  /// Sends one command and waits for its reply.
  public func command(_ arguments: [String]) throws(RedisError) -> RedisReply {
    try command(arguments.map { Array($0.utf8) })
  }

  public func command(_ arguments: [[UInt8]]) throws(RedisError) -> RedisReply {
    try append(arguments)
    return try reply()
  }

  /// Queues a command (pipelining): its reply is read by a later `reply()`.
  public func append(_ arguments: [[UInt8]]) throws(RedisError) {
    let count = arguments.count
    let pointers = UnsafeMutablePointer<UnsafePointer<CChar>?>.allocate(capacity: count)
    let lengths = UnsafeMutablePointer<Int>.allocate(capacity: count)
    defer {
      pointers.deallocate()
      lengths.deallocate()
    }
    // One buffer holds every argument, so the pointers stay valid for the call.
    var joined: [UInt8] = []
    joined.reserveCapacity(arguments.reduce(0) { $0 + $1.count })
    var offsets: [Int] = []
    for argument in arguments {
      offsets.append(joined.count)
      joined += argument
    }
    let status = joined.withUnsafeBufferPointer { buffer -> Int32 in
      let base = UnsafeRawPointer(buffer.baseAddress ?? UnsafePointer(bitPattern: 1)!)
      for i in 0..<count {
        pointers[i] = (base + offsets[i]).assumingMemoryBound(to: CChar.self)
        lengths[i] = arguments[i].count
      }
      return redisAppendCommandArgv(context, Int32(count), pointers, lengths)
    }
    guard status == REDIS_OK else { throw .connection("connection lost: " + errorText) }
  }

  /// Queues commands already in the protocol, in one piece.
  public func append(_ commands: RESPCommands) throws(RedisError) {
    let status = commands.bytes.withUnsafeBufferPointer { buffer in
      buffer.withMemoryRebound(to: CChar.self) {
        redisAppendFormattedCommand(context, $0.baseAddress, $0.count)
      }
    }
    guard status == REDIS_OK else { throw .connection("connection lost: " + errorText) }
  }

  /// Reads the next reply only for its error: the server's message if it
  /// is one, or holds one (an `EXEC` result), else nil. Nothing is copied
  /// for replies that are not errors: a batch has thousands of them.
  public func replyError() throws(RedisError) -> String? {
    var raw: UnsafeMutableRawPointer?
    guard redisGetReply(context, &raw) == REDIS_OK, let raw else {
      throw .connection("connection lost: " + errorText)
    }
    let reply = raw.assumingMemoryBound(to: redisReply.self)
    defer { freeReplyObject(reply) }
    func firstError(_ r: UnsafeMutablePointer<redisReply>) -> String? {
      switch r.pointee.type {
      case REDIS_REPLY_ERROR: return String(cString: r.pointee.str)
      case REDIS_REPLY_ARRAY:
        for i in 0..<Int(r.pointee.elements) {
          if let message = firstError(r.pointee.element[i]!) { return message }
        }
        return nil
      case REDIS_REPLY_NIL where r == reply: return "null reply (the transaction was aborted)"
      default: return nil
      }
    }
    return firstError(reply)
  }

  /// The next reply of the pipeline.
  public func reply() throws(RedisError) -> RedisReply {
    var raw: UnsafeMutableRawPointer?
    guard redisGetReply(context, &raw) == REDIS_OK, let raw else {
      throw .connection("connection lost: " + errorText)
    }
    let reply = raw.assumingMemoryBound(to: redisReply.self)
    defer { freeReplyObject(reply) }
    return Self.decode(reply)
  }

  private var errorText: String {
    credis_err(context) == 0 ? "no reply" : String(cString: credis_errstr(context))
  }

  private static func decode(_ r: UnsafeMutablePointer<redisReply>) -> RedisReply {
    let reply = r.pointee
    switch reply.type {
    case REDIS_REPLY_STRING:
      return .bytes(
        Array(UnsafeRawBufferPointer(start: reply.str, count: Int(reply.len))))
    case REDIS_REPLY_STATUS:
      return .status(String(cString: reply.str))
    case REDIS_REPLY_ERROR:
      return .error(String(cString: reply.str))
    case REDIS_REPLY_INTEGER:
      return .integer(reply.integer)
    case REDIS_REPLY_ARRAY:
      return .array((0..<Int(reply.elements)).map { decode(reply.element[$0]!) })
    default:
      return .null
    }
  }
}

/// A reply, or the server's error thrown.
@discardableResult
func check(_ reply: RedisReply) throws(RedisError) -> RedisReply {
  if case .error(let message) = reply { throw .refusal(message) }
  return reply
}

/// Commands in the Redis protocol (RESP), written into one buffer: the
/// thousands of `XADD`s of a batch cost no allocation each and reach hiredis
/// in one piece.
public struct RESPCommands {
  public private(set) var bytes: [UInt8] = []
  /// Replies to expect: one per command.
  public private(set) var count = 0

  public init() {}

  /// Starts a command of `arguments` arguments, given next.
  public mutating func command(arguments: Int) {
    bytes.append(UInt8(ascii: "*"))
    decimal(arguments)
    count += 1
  }

  public mutating func argument(_ value: some Collection<UInt8>) {
    bulkHeader(value.count)
    bytes += value
    crlf()
  }

  public mutating func argument(_ text: StaticString) {
    argument(UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
  }

  /// An argument of `first` followed by `rest`.
  public mutating func argument(_ first: UInt8, _ rest: ArraySlice<UInt8>) {
    bulkHeader(1 + rest.count)
    bytes.append(first)
    bytes += rest
    crlf()
  }

  private mutating func bulkHeader(_ length: Int) {
    bytes.append(UInt8(ascii: "$"))
    decimal(length)
  }

  /// `n` in decimal (a small string: no allocation), then CRLF.
  private mutating func decimal(_ n: Int) {
    bytes += String(n).utf8
    crlf()
  }

  private mutating func crlf() {
    bytes.append(0x0D)
    bytes.append(0x0A)
  }
}
