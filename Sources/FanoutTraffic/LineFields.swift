import FanoutIndex
import FanoutModel

/// The fields of the traffic format, by the position `LineFields` and the
/// parsers give them.
enum Field: Int, CaseIterable {
  case id, channel, sender, ts, kind, mentions, mentionAll, replyTo, category, force, silent,
    thread, event, user

  /// `allCases` builds a new array on every call; this one is built once.
  static let all = Field.allCases

  /// The field a key names, matched on its bytes (no `String` per key):
  /// the key packed little-endian into two words, compared with each
  /// name's (the words in hexadecimal spell the name backwards).
  init?(key: UnsafeRawBufferPointer) {
    guard key.count <= 16 else { return nil }
    var low: UInt64 = 0
    var high: UInt64 = 0
    var i = 0
    if key.count >= 8 {
      low = UInt64(littleEndian: key.loadUnaligned(as: UInt64.self))
      i = 8
    }
    while i < key.count {
      let byte = UInt64(key[i]) << (8 * UInt64(i & 7))
      if i < 8 { low |= byte } else { high |= byte }
      i += 1
    }
    self.init(count: key.count, low: low, high: high)
  }

  /// The field named by the `count` bytes packed little-endian into `low`
  /// (the first eight, zero above) and `high` (the rest).
  @inline(__always)
  init?(count: Int, low: UInt64, high: UInt64) {
    switch (count, low, high) {
    case (2, 0x6469, 0): self = .id
    case (7, 0x6c_656e_6e61_6863, 0): self = .channel
    case (6, 0x7265_646e_6573, 0): self = .sender
    case (2, 0x7374, 0): self = .ts
    case (4, 0x646e_696b, 0): self = .kind
    case (8, 0x736e_6f69_746e_656d, 0): self = .mentions
    case (11, 0x5f6e_6f69_746e_656d, 0x6c_6c61): self = .mentionAll
    case (8, 0x6f74_5f79_6c70_6572, 0): self = .replyTo
    case (8, 0x7972_6f67_6574_6163, 0): self = .category
    case (5, 0x65_6372_6f66, 0): self = .force
    case (6, 0x746e_656c_6973, 0): self = .silent
    case (6, 0x6461_6572_6874, 0): self = .thread
    case (5, 0x74_6e65_7665, 0): self = .event
    case (4, 0x7265_7375, 0): self = .user
    default: return nil
    }
  }

  var name: String {
    switch self {
    case .id: "id"
    case .channel: "channel"
    case .sender: "sender"
    case .ts: "ts"
    case .kind: "kind"
    case .mentions: "mentions"
    case .mentionAll: "mention_all"
    case .replyTo: "reply_to"
    case .category: "category"
    case .force: "force"
    case .silent: "silent"
    case .thread: "thread"
    case .event: "event"
    case .user: "user"
    }
  }
}

extension MessageKind {
  private static let all = MessageKind.allCases.map { (kind: $0, name: Array($0.name.utf8)) }

  /// The kind a traffic line's `kind` names, matched on its bytes.
  init?(named name: some Collection<UInt8>) {
    guard let match = Self.all.first(where: { $0.name.elementsEqual(name) }) else { return nil }
    self = match.kind
  }
}

/// One message's fields as read from a traffic line, its strings as byte
/// ranges into the text they were read from: the line itself (a plain
/// line) or the general parser's decoded copy. Both parsers fill it, and
/// `TrafficParser` keeps a message from it the one way.
struct LineFields {
  /// Contract v3: a read line (`"event":"read"`), else a message.
  var isRead = false
  /// A read line's reader.
  var user: Range<Int>?
  var id = 0..<0
  var channel = 0..<0
  /// nil: absent (or null).
  var sender: Range<Int>?
  var replyTo: Range<Int>?
  var thread: Range<Int>?
  /// The category's name; resolved when the message is kept.
  var category: Range<Int>?
  var ts: Int64 = 0
  var kind = MessageKind.message
  var mentionAll = false
  var force = false
  var silent = false
  /// Kept from line to line, so that reading a line does not allocate.
  var mentions: [Range<Int>] = []

  /// Back to no fields, keeping the mention list's storage.
  mutating func clear() {
    isRead = false
    user = nil
    sender = nil
    replyTo = nil
    thread = nil
    category = nil
    kind = .message
    mentionAll = false
    force = false
    silent = false
    mentions.removeAll(keepingCapacity: true)
  }
}
