import FanoutModel

/// The members one message singles out — named (mentions, reply_to), muting
/// its sender (`user_mutes`), with a chat level for its thread
/// (`thread_prefs`), throttled by rule 8 (`ThrottleLedger`) — as cursors over lists that ascend by user row, like
/// the channel's members: asking about members in ascending order walks
/// each list once, with no search and no allocation.
struct SingledOut {
  private var mentions: SortedCursor
  private let replyTo: Int32
  private var muters: SortedCursor
  private var threadUsers: SortedCursor
  private let threadLevels: UnsafeBufferPointer<Level>
  private var throttled: SortedCursor

  init(
    mentions: SortedCursor, replyTo: Int32, muters: SortedCursor, threadUsers: SortedCursor,
    threadLevels: UnsafeBufferPointer<Level>, throttled: SortedCursor
  ) {
    self.mentions = mentions
    self.replyTo = replyTo
    self.muters = muters
    self.threadUsers = threadUsers
    self.threadLevels = threadLevels
    self.throttled = throttled
  }

  /// What the message asks of user row `u`. Call with ascending rows.
  @inline(__always)
  mutating func terms(for u: Int32) -> Evaluator.PairTerms {
    var terms = Evaluator.PairTerms()
    terms.named = replyTo == u || mentions.seek(u) != nil
    terms.mutedSender = muters.seek(u) != nil
    if let k = threadUsers.seek(u) { terms.threadLevel = threadLevels[k] }
    terms.throttled = throttled.seek(u) != nil
    return terms
  }

  /// Calls `body` with each singled-out user row once, ascending.
  mutating func forEachUser(_ body: (Int32) -> Void) {
    var replyPending = replyTo >= 0
    while true {
      var u = Int32.max
      if let v = mentions.head { u = min(u, v) }
      if let v = muters.head { u = min(u, v) }
      if let v = threadUsers.head { u = min(u, v) }
      if let v = throttled.head { u = min(u, v) }
      if replyPending { u = min(u, replyTo) }
      if u == .max { return }
      body(u)
      if mentions.head == u { mentions.advance() }
      if muters.head == u { muters.advance() }
      if threadUsers.head == u { threadUsers.advance() }
      if throttled.head == u { throttled.advance() }
      if replyTo == u { replyPending = false }
    }
  }
}

/// A position in an ascending run of user rows.
struct SortedCursor {
  private let values: UnsafeBufferPointer<Int32>
  private var next: Int
  private let end: Int

  static var empty: SortedCursor { SortedCursor(UnsafeBufferPointer(start: nil, count: 0), 0..<0) }

  init(_ values: UnsafeBufferPointer<Int32>, _ rows: Range<Int>) {
    self.values = values
    next = rows.lowerBound
    end = rows.upperBound
  }

  /// Moves past the rows below `u`; the position of `u` if it is listed.
  @inline(__always)
  mutating func seek(_ u: Int32) -> Int? {
    while next < end && values[next] < u { next &+= 1 }
    return next < end && values[next] == u ? next : nil
  }

  var head: Int32? { next < end ? values[next] : nil }

  mutating func advance() { next &+= 1 }
}
