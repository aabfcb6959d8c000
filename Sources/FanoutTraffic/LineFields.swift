import FanoutIndex
import FanoutModel

/// The fields of the traffic format, by the position `LineFields` and the
/// parsers give them.
enum Field: Int, CaseIterable {
  case id, channel, sender, ts, kind, mentions, mentionAll, replyTo, category, force, silent,
    thread

  /// `allCases` builds a new array on every call; this one is built once.
  static let all = Field.allCases

  /// Each field's name as bytes.
  static let names = all.map { Array($0.name.utf8) }

  /// The field a key names, matched on its bytes (no `String` per key):
  /// one candidate by length and first byte, then compared whole.
  init?(key: UnsafeRawBufferPointer) {
    let candidate: Field? =
      switch (key.count, key.first ?? 0) {
      case (2, UInt8(ascii: "i")): .id
      case (2, UInt8(ascii: "t")): .ts
      case (4, _): .kind
      case (5, _): .force
      case (6, UInt8(ascii: "t")): .thread
      case (6, _): key[1] == UInt8(ascii: "e") ? .sender : .silent
      case (7, _): .channel
      case (8, UInt8(ascii: "m")): .mentions
      case (8, UInt8(ascii: "r")): .replyTo
      case (8, _): .category
      case (11, _): .mentionAll
      default: nil
      }
    guard let candidate,
      Self.names[candidate.rawValue].withUnsafeBytes({
        $0.count == key.count && sameBytes($0.baseAddress!, key.baseAddress!, key.count)
      })
    else { return nil }
    self = candidate
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
