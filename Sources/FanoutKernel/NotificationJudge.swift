import FanoutIndex
import FanoutModel

/// What the input-order passes found for one batch against one index:
/// rule 8's throttled members and contract v3's notification fields.
public struct LedgerVerdicts: Sendable {
  public var throttled: ThrottledMembers = .none
  public var notifications: NotificationFields? = nil
  /// With `LedgerPass.outcomes` or `.deliveries`: the batch's chunks as
  /// the pass evaluated them, without rule 8, by their first message.
  public var evaluated: [Int: ChunkResult] = [:]
  /// On index 0's verdicts, what the work decided beside that pass's
  /// evaluation of each chunk (`ChunkWork.firstPass`), by its first message.
  public var decidedBeside: [Int: [ChunkResult]] = [:]

  public init(
    throttled: ThrottledMembers = .none, notifications: NotificationFields? = nil,
    evaluated: [Int: ChunkResult] = [:]
  ) {
    self.throttled = throttled
    self.notifications = notifications
    self.evaluated = evaluated
  }

  public static let none = LedgerVerdicts()
}

/// One delivered pair's notification (contract v3, section 6.4), as the
/// walk finds it and the evaluator writes it: one record, so that a pair
/// is one append and one cache line, not one per field.
public struct PairNote: Sendable, Equatable {
  /// The notification's group id, id and badge; id 0: a pair rule 8
  /// throttles, which takes none.
  public var group: Int64
  public var id: Int64
  public var badge: Int64
  /// The pair's user row.
  public var user: Int32
  /// Where the ids it hid end in the hidden ids of its list (the walk's or
  /// `NotificationFields.hides`); they start where the previous pair's
  /// end.
  public var hidesEnd: Int32

  /// A throttled pair of user `u`.
  static func none(user u: Int32, hidesEnd: Int32) -> PairNote {
    PairNote(group: 0, id: 0, badge: 0, user: u, hidesEnd: hidesEnd)
  }
}

/// Per message of one batch, the notifications of its pairs delivered
/// before rule 8 (contract v3, section 6.4), by user row ascending: the
/// fields the evaluator writes on the pair's recipient entries and decision
/// line. A pair rule 8 throttles is listed with notification 0: it takes
/// none.
public struct NotificationFields: Sendable {
  /// Per message, where its pairs start in `notes`, and one more at the end.
  public var starts: [Int32] = [0]
  public var notes: [PairNote] = []
  public var hides: [Int64] = []

  public init() {}

  /// Where user row `u`'s notification for message `m` is, if it has one.
  public func pair(of m: Int, user u: Int32) -> Int? {
    let pairs = Int(starts[m])..<Int(starts[m + 1])
    guard let k = pairs.first(where: { notes[$0].user == u }), notes[k].id != 0 else { return nil }
    return k
  }

  /// The ids pair `k`'s notification hid, ascending.
  public func hidden(by k: Int) -> ArraySlice<Int64> {
    hides[Self.hideRange(of: k, in: notes)]
  }

  /// Where pair `k`'s hidden ids lie in its list's `hides`: from where the
  /// previous pair's end.
  @inline(__always)
  static func hideRange<Notes: RandomAccessCollection<PairNote>>(of k: Int, in notes: Notes)
    -> Range<Int>
  where Notes.Index == Int {
    (k == 0 ? 0 : Int(notes[k &- 1].hidesEnd))..<Int(notes[k].hidesEnd)
  }

  /// The fields as unsafe views, for `body`'s duration.
  func withView<R>(_ body: (View) -> R) -> R {
    starts.withUnsafeBufferPointer { starts in
      notes.withUnsafeBufferPointer { notes in
        hides.withUnsafeBufferPointer { hides in
          body(View(starts: starts, notes: notes, hides: hides))
        }
      }
    }
  }

  /// `NotificationFields` as buffers: the evaluator keeps one per batch
  /// and reads it per pair, which a copy of the arrays (retaining each)
  /// would not allow for free.
  struct View {
    var starts: UnsafeBufferPointer<Int32>
    var notes: UnsafeBufferPointer<PairNote>
    var hides: UnsafeBufferPointer<Int64>

    static var empty: View {
      View(
        starts: .init(start: nil, count: 0), notes: .init(start: nil, count: 0),
        hides: .init(start: nil, count: 0))
    }

    /// `,"group":G,"notification":N,"badge":B` and `,"hide":[…]` when it
    /// hid any, for pair `k`.
    @inline(__always)
    func appendFields<Bytes: ByteOutput>(_ k: Int, to bytes: inout Bytes) {
      let note = notes[k]
      bytes.append(contentsOf: Self.keys[0])
      bytes.appendDecimal(note.group)
      bytes.append(contentsOf: Self.keys[1])
      bytes.appendDecimal(note.id)
      bytes.append(contentsOf: Self.keys[2])
      bytes.appendDecimal(note.badge)
      let hidden = NotificationFields.hideRange(of: k, in: notes)
      guard !hidden.isEmpty else { return }
      bytes.append(contentsOf: Self.keys[3])
      appendIDs(hides[hidden], to: &bytes)
    }

    /// The fields' keys, copied as bytes (a string's UTF-8 view is copied
    /// through a slower path).
    private static let keys = FixedStrings([
      #","group":"#, #","notification":"#, #","badge":"#, #","hide":"#,
    ])
  }
}

/// `[1,2,4]`.
func appendIDs<IDs: Collection<Int64>, Bytes: ByteOutput>(_ ids: IDs, to bytes: inout Bytes) {
  bytes.append(UInt8(ascii: "["))
  for (i, id) in ids.enumerated() {
    if i > 0 { bytes.append(UInt8(ascii: ",")) }
    bytes.appendDecimal(id)
  }
  bytes.append(UInt8(ascii: "]"))
}

/// What contract v3's pass found for one wave: per batch, its pairs'
/// notification fields, and the update lines of its read lines, in input
/// order.
public struct NotificationWave: Sendable {
  public var fields: [NotificationFields]
  /// `{"line":…,"removed":[…],…}` per read line that removed any.
  public var updates: [UInt8]
  /// Read lines seen (all of them, whether they removed anything).
  public var reads: Int
  /// With `NotificationJudge.recordsRemovals`: each update, as values.
  public var removals: [Removal] = []
}

/// One read line's removals (contract v3), as values (`explain` narrates them).
public struct Removal: Sendable {
  public var line: Int
  /// The read line's id, as a JSON string literal.
  public var idJSON: [UInt8]
  public var user: Int32
  public var ts: Int64
  public var removed: [Int64]
  public var cancelled: [Int64]
  public var badge: Int64
}

/// Contract v3's notification state over a run, wave by wave, after rule 8
/// (throttled pairs take no notification), decided between `Ledgers`' pass
/// over a wave and its evaluation: the ledger's partitions, one thread
/// each, walk the wave's lines in input order, each for its own users,
/// adding the notifications of the pairs delivered and applying read
/// lines; then each batch's fields are gathered from the partitions, the
/// batches in parallel, for the evaluator to write.
public final class NotificationJudge {
  public let index: Index
  public private(set) var ledger: NotificationLedger
  private let threads: Int
  /// Whether each wave lists its removals as values too (`explain`).
  public var recordsRemovals = false
  /// Whether each wave gives its pairs' fields (not when only counts are
  /// kept: `eval --summary-only`).
  public var buildsFields = true

  /// A judge for `index` (which must turn notification groups on), with a
  /// fresh ledger.
  init(index: Index, caps: AppSettings.NotificationGroups, threads: Int) {
    self.index = index
    self.threads = max(1, threads)
    ledger = NotificationLedger(caps: caps, partitions: self.threads, index: index)
  }

  /// Carries `previous`'s state over to this judge's index, by user id and
  /// channel id (a stream's snapshot reload).
  func inherit(from previous: NotificationJudge) {
    ledger = previous.ledger.rekeyed(from: previous.index, to: index, partitions: threads)
  }

  /// The notifications of `batches` (cut by `plan` into chunks in input
  /// order; `delivered`: each chunk's pairs delivered before rule 8;
  /// `throttled` per batch from rule 8), and their read lines' updates;
  /// updates the ledger.
  func judge(
    _ batches: [MessageBatch], plan: [(batch: Int, messages: Range<Int>)],
    delivered: [DeliveredPairs], throttled: [ThrottledMembers]
  ) -> NotificationWave {
    // Plan chunks by batch (the plan is in input order).
    var chunksByBatch = [[Int]](repeating: [], count: batches.count)
    for (k, chunk) in plan.enumerated() { chunksByBatch[chunk.batch].append(k) }
    let chunksOf = chunksByBatch
    let ledger = ledger
    let recordsRemovals = recordsRemovals
    let buildsFields = buildsFields
    let index = index
    let walked = runChunks(count: ledger.partitions.count, workers: threads, empty: Walk()) {
      p in
      var walk = Walk()
      ledger.partitions[p].walk { state in
        var removed: [Int64] = []
        var cancelled: [Int64] = []
        func read(_ reads: ReadLines, _ r: Int) {
          let u = reads.user[r]
          guard u >= 0, ledger.partition(ofUser: u) == p,
            let slot = index.memberSlot(user: u, channel: Int(reads.channel[r]))
          else { return }
          removed.removeAll(keepingCapacity: true)
          cancelled.removeAll(keepingCapacity: true)
          let badge = state.read(
            user: u, slot: slot, at: reads.ts[r], removed: &removed, cancelled: &cancelled)
          guard !removed.isEmpty else { return }
          if recordsRemovals {
            walk.removals.append(
              Removal(
                line: reads.lines[r], idJSON: Array(reads.idJSON[r]), user: u, ts: reads.ts[r],
                removed: removed, cancelled: cancelled, badge: badge))
          }
          walk.appendUpdate(
            reads, r, removed: removed, cancelled: cancelled, badge: badge, index: index)
        }
        var mine = PartitionPairs()
        for (b, batch) in batches.enumerated() {
          walk.batchStarts.append((walk.notes.count, walk.hides.count))
          let reads = batch.reads
          var r = 0
          for k in chunksOf[b] {
            let pairs = delivered[k]
            let messages = plan[k].messages
            pairs.users.withUnsafeBufferPointer { users in
              mine.collect(pairs) { i in ledger.partition(ofUser: users[i]) == p }
            }
            var ahead = Lookahead(mine, pairs, state)
            var current = -1
            var throttledUsers: ArraySlice<Int32> = []
            for x in 0..<mine.count {
              ahead.prefetch(x, mine, pairs, state)
              let i = Int(mine.pair[x])
              let m = messages.lowerBound &+ Int(mine.message[x])
              if m != current {
                // A read before this message applies first; the others can wait.
                current = m
                while r < reads.count && reads.lines[r] < batch.lines[m] {
                  read(reads, r)
                  r += 1
                }
                throttledUsers = throttled[b].users(of: m)
              }
              let u = pairs.users[i]
              if pairs.triggers[i] == .message && !throttledUsers.isEmpty {
                while let first = throttledUsers.first, first < u { throttledUsers.removeFirst() }
                if throttledUsers.first == u {
                  if buildsFields { walk.notes.append(.none(user: u, hidesEnd: walk.hidesEnd)) }
                  continue
                }
              }
              let note = state.add(
                user: u, slot: Int(pairs.slots[i]), channel: batch.channel[m],
                trigger: pairs.triggers[i],
                ts: batch.ts[m], deliverAt: pairs.deliverAt[i], hides: &walk.hides)
              if buildsFields {
                walk.notes.append(
                  PairNote(
                    group: note.group, id: note.id, badge: note.badge, user: u,
                    hidesEnd: walk.hidesEnd))
              } else {
                walk.hides.removeAll(keepingCapacity: true)
              }
            }
          }
          while r < reads.count {
            read(reads, r)
            r += 1
          }
        }
        walk.batchStarts.append((walk.notes.count, walk.hides.count))
      }
      return walk
    }
    let fields =
      buildsFields
      ? runChunks(count: batches.count, workers: threads, empty: NotificationFields()) { b in
        Self.fields(
          chunks: chunksOf[b], delivered: delivered, walked: walked, batch: b, ledger: ledger)
      }
      : [NotificationFields](repeating: NotificationFields(), count: batches.count)
    return NotificationWave(
      fields: fields,
      updates: Self.updates(from: walked),
      reads: batches.reduce(0) { $0 + $1.reads.count },
      removals: walked.flatMap(\.removals).sorted { $0.line < $1.line })
  }

  /// Batch `b`'s fields (its pairs are the delivered pairs of `chunks`, in
  /// order), each pair's taken from its user's partition, where the pairs
  /// of the batch are in the same order.
  private static func fields(
    chunks: [Int], delivered: [DeliveredPairs], walked: [Walk], batch b: Int,
    ledger: NotificationLedger
  ) -> NotificationFields {
    var fields = NotificationFields()
    fields.notes.reserveCapacity(chunks.reduce(0) { $0 + delivered[$1].users.count })
    fields.starts.reserveCapacity(chunks.reduce(1) { $0 + delivered[$1].ends.count })
    var next = walked.map { $0.batchStarts[b].pairs }
    var nextHide = walked.map { $0.batchStarts[b].hides }
    // (Through views: an array read out of `walked` per pair is retained.)
    withViews(of: walked) { notes, hides in
      for k in chunks {
        let pairs = delivered[k]
        let base = Int32(fields.notes.count)
        for end in pairs.ends { fields.starts.append(base &+ end) }
        pairs.users.withUnsafeBufferPointer { users in
          for u in users {
            let p = ledger.partition(ofUser: u)
            var note = notes[p][next[p]]
            next[p] &+= 1
            let hidesEnd = Int(note.hidesEnd)
            if hidesEnd > nextHide[p] {
              fields.hides.append(contentsOf: hides[p][nextHide[p]..<hidesEnd])
              nextHide[p] = hidesEnd
            }
            note.hidesEnd = Int32(truncatingIfNeeded: fields.hides.count)
            fields.notes.append(note)
          }
        }
      }
    }
    return fields
  }

  /// Calls `body` with each partition's walked notes and hidden ids as
  /// buffers, for its duration.
  private static func withViews<R>(
    of walked: [Walk],
    _ body: ([UnsafeBufferPointer<PairNote>], [UnsafeBufferPointer<Int64>]) -> R
  ) -> R {
    func nest(
      _ p: Int, _ notes: [UnsafeBufferPointer<PairNote>], _ hides: [UnsafeBufferPointer<Int64>]
    ) -> R {
      guard p < walked.count else { return body(notes, hides) }
      return walked[p].notes.withUnsafeBufferPointer { n in
        walked[p].hides.withUnsafeBufferPointer { h in nest(p + 1, notes + [n], hides + [h]) }
      }
    }
    return nest(0, [], [])
  }

  /// The partitions' update lines, merged by line number.
  private static func updates(from walked: [Walk]) -> [UInt8] {
    if walked.count == 1 { return walked[0].updates }
    var bytes: [UInt8] = []
    var next = [Int](repeating: 0, count: walked.count)
    while true {
      var best = -1
      for p in walked.indices where next[p] < walked[p].updateLines.count {
        if best < 0 || walked[p].updateLines[next[p]] < walked[best].updateLines[next[best]] {
          best = p
        }
      }
      guard best >= 0 else { return bytes }
      let i = next[best]
      let from = i == 0 ? 0 : walked[best].updateEnds[i - 1]
      bytes += walked[best].updates[from..<walked[best].updateEnds[i]]
      next[best] += 1
    }
  }

  /// The walk's prefetching (`NotificationState`'s four stages), some of
  /// the partition's pairs ahead; what a stage finds (the pair's key, its
  /// group, the count cap's choice) is kept for the next, by pair, in a
  /// ring.
  private struct Lookahead {
    var record = InlineArray<32, Int>(repeating: 0)
    var slot = InlineArray<32, Int>(repeating: 0)
    var type = InlineArray<32, UInt8>(repeating: 0)
    var group = InlineArray<32, Int>(repeating: -1)
    var choice = InlineArray<32, Int>(repeating: -1)

    static let distances = (user: 20, group: 13, blocks: 7, hidden: 3)

    /// The ring's first pairs' keys, before the walk's first pair.
    init(_ mine: PartitionPairs, _ pairs: DeliveredPairs, _ state: NotificationState) {
      for y in 0..<min(Self.distances.user, mine.count) { keep(y, mine, pairs, state) }
    }

    /// Pair `y`'s user record, membership slot and group type.
    @inline(__always)
    mutating func keep(
      _ y: Int, _ mine: PartitionPairs, _ pairs: DeliveredPairs, _ state: NotificationState
    ) {
      let i = Int(mine.pair[y])
      record[y & 31] = state.record(ofUser: pairs.users[i])
      slot[y & 31] = Int(pairs.slots[i])
      type[y & 31] = NotificationGroupType(pairs.triggers[i]).rawValue
    }

    @inline(__always)
    mutating func prefetch(
      _ x: Int, _ mine: PartitionPairs, _ pairs: DeliveredPairs, _ state: NotificationState
    ) {
      let d = Self.distances
      if x &+ d.user < mine.count {
        let y = x &+ d.user
        keep(y, mine, pairs, state)
        state.prefetchUser(record: record[y & 31], slot: slot[y & 31], type: type[y & 31])
      }
      if x &+ d.group < mine.count {
        let y = (x &+ d.group) & 31
        group[y] = state.prefetchGroup(record: record[y], slot: slot[y], type: type[y])
      }
      if x &+ d.blocks < mine.count {
        let y = (x &+ d.blocks) & 31
        choice[y] = state.prefetchBlocks(record: record[y], group: group[y])
      }
      if x &+ d.hidden < mine.count { state.prefetchHidden(group: choice[(x &+ d.hidden) & 31]) }
    }
  }

  /// One partition's part of a wave: its pairs' notifications in input
  /// order (notification 0: throttled), each with where the ids it hid end
  /// in `hides`, where each batch's begin, and its update lines with their
  /// line numbers.
  private struct Walk: Sendable {
    var notes: [PairNote] = []
    var hides: [Int64] = []
    var batchStarts: [(pairs: Int, hides: Int)] = []
    /// Where the hidden ids of the last pair's notification end.
    var hidesEnd: Int32 { Int32(truncatingIfNeeded: hides.count) }
    var updates: [UInt8] = []
    var updateLines: [Int] = []
    var updateEnds: [Int] = []
    var removals: [Removal] = []

    /// `{"line":…,"id":…,"user":…,"channel":…,"ts":…,"removed":[…],"cancelled":[…],"badge":…}`
    /// for read line `r`.
    mutating func appendUpdate(
      _ reads: ReadLines, _ r: Int, removed: [Int64], cancelled: [Int64], badge: Int64,
      index: Index
    ) {
      updateLines.append(reads.lines[r])
      updates += #"{"line":"#.utf8
      JSONText.appendDecimal(Int64(reads.lines[r]), to: &updates)
      updates += #","id":"#.utf8
      updates += reads.idJSON[r]
      updates += #","user":"#.utf8
      updates += index.userJSON[Int(reads.user[r])]
      updates += #","channel":"#.utf8
      index.channels.pool.withBytes(Int(reads.channel[r])) {
        JSONText.appendQuoted($0, to: &updates)
      }
      updates += #","ts":"#.utf8
      JSONText.appendDecimal(reads.ts[r], to: &updates)
      updates += #","removed":"#.utf8
      appendIDs(removed[...], to: &updates)
      updates += #","cancelled":"#.utf8
      appendIDs(cancelled[...], to: &updates)
      updates += #","badge":"#.utf8
      JSONText.appendDecimal(badge, to: &updates)
      updates += "}\n".utf8
      updateEnds.append(updates.count)
    }
  }
}
