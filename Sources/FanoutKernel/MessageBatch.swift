import FanoutIndex
import FanoutModel

/// A traffic line that was not evaluated, and why.
public struct Rejection: Sendable, Equatable {
  public let line: Int
  public let reason: String

  public init(line: Int, reason: String) {
    self.line = line
    self.reason = reason
  }
}

/// Parsed messages in columns, in input order, plus the lines rejected
/// among them: the kernel's input, which the traffic parser (FanoutTraffic)
/// fills.
public struct MessageBatch: Sendable {
  public var lines: [Int] = []
  /// Each message id as a JSON string literal.
  public var idJSON = BytePool()
  public var channel: [Int32] = []
  /// The sender's user row, or -1 (absent or unknown).
  public var sender: [Int32] = []
  public var ts: [Int64] = []
  public var kind: [MessageKind] = []
  public var mentionAll: [Bool] = []
  public var force: [Bool] = []
  /// Contract v2: the sender asked for no notification.
  public var silent: [Bool] = []
  /// Contract v2: each message's thread id (empty when it has none; see
  /// `hasThread`, as "" is a thread id like any other).
  public var thread = BytePool()
  public var hasThread: [Bool] = []
  /// The replied-to author's user row, or -1.
  public var replyTo: [Int32] = []
  /// The category row, or -1.
  public var category: [Int32] = []
  /// CSR: message → mentioned user rows, sorted, unknown users dropped.
  public var mentionOffsets: [Int32] = [0]
  public var mentions: [Int32] = []
  public var rejections: [Rejection] = []
  /// Contract v3: the batch's read lines, beside its messages.
  public var reads = ReadLines()

  public init() {}

  public var count: Int { ts.count }

  /// Appends message `m` of `other`.
  public mutating func append(_ m: Int, of other: MessageBatch) {
    lines.append(other.lines[m])
    other.idJSON.withBytes(m) { idJSON.append($0) }
    channel.append(other.channel[m])
    sender.append(other.sender[m])
    ts.append(other.ts[m])
    kind.append(other.kind[m])
    mentionAll.append(other.mentionAll[m])
    force.append(other.force[m])
    silent.append(other.silent[m])
    other.thread.withBytes(m) { thread.append($0) }
    hasThread.append(other.hasThread[m])
    replyTo.append(other.replyTo[m])
    category.append(other.category[m])
    mentions.append(contentsOf: other.mentions(of: m))
    mentionOffsets.append(Int32(mentions.count))
  }

  /// The mentioned user rows of message `m`.
  public func mentions(of m: Int) -> ArraySlice<Int32> {
    mentions[Int(mentionOffsets[m])..<Int(mentionOffsets[m + 1])]
  }
}

/// Contract v3's read lines of a batch, in line order: `user` has read
/// `channel` up to `ts`. They form no pair; with notification groups on
/// they remove the reader's notifications (`NotificationLedger`).
public struct ReadLines: Sendable {
  public var lines: [Int] = []
  /// Each read line's id as a JSON string literal.
  public var idJSON = BytePool()
  public var channel: [Int32] = []
  /// The reader's user row, or -1 (unknown: the line has no effect).
  public var user: [Int32] = []
  public var ts: [Int64] = []

  public init() {}

  public var count: Int { lines.count }
}
