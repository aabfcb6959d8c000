import FanoutIndex
import FanoutModel

/// What the input-order passes found for one batch against one index:
/// rule 8's throttled members and contract v3's notification fields.
public struct LedgerVerdicts: Sendable {
  public var throttled: ThrottledMembers = .none
  public var notifications: NotificationFields? = nil

  public init(throttled: ThrottledMembers = .none, notifications: NotificationFields? = nil) {
    self.throttled = throttled
    self.notifications = notifications
  }

  public static let none = LedgerVerdicts()
}

/// Per message of one batch, the notifications of its delivered pairs
/// (contract v3, section 6.4), by user row ascending: the fields the
/// evaluator writes on the pair's recipient entries and decision line.
public struct NotificationFields: Sendable {
  /// Per message, where its pairs start in `users`, and one more at the end.
  public var starts: [Int32] = [0]
  public var users: [Int32] = []
  public var group: [Int64] = []
  public var notification: [Int64] = []
  public var badge: [Int64] = []
  /// Per pair, where its hidden ids end in `hides`.
  public var hideEnds: [Int32] = []
  public var hides: [Int64] = []

  public init() {}

  /// `,"group":G,"notification":N,"badge":B` and `,"hide":[…]` when it hid
  /// any, for pair `k`.
  func appendFields(_ k: Int, to bytes: inout [UInt8]) {
    bytes += #","group":"#.utf8
    JSONText.appendDecimal(group[k], to: &bytes)
    bytes += #","notification":"#.utf8
    JSONText.appendDecimal(notification[k], to: &bytes)
    bytes += #","badge":"#.utf8
    JSONText.appendDecimal(badge[k], to: &bytes)
    let hidden = (k == 0 ? 0 : Int(hideEnds[k &- 1]))..<Int(hideEnds[k])
    guard !hidden.isEmpty else { return }
    bytes += #","hide":"#.utf8
    appendIDs(hides[hidden], to: &bytes)
  }
}

/// `[1,2,4]`.
func appendIDs(_ ids: ArraySlice<Int64>, to bytes: inout [UInt8]) {
  bytes.append(UInt8(ascii: "["))
  for (i, id) in ids.enumerated() {
    if i > 0 { bytes.append(UInt8(ascii: ",")) }
    JSONText.appendDecimal(id, to: &bytes)
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
/// (throttled pairs take no notification). Like `ThrottleJudge`, in three
/// steps: the wave's chunks are evaluated in parallel keeping only each
/// message's delivered pairs; the ledger's partitions, one thread each,
/// walk the lines in input order, each for its own users, adding
/// notifications and applying read lines; the caller evaluates the wave
/// with the fields found, which the evaluator writes.
public final class NotificationJudge {
  public let index: Index
  public private(set) var ledger: NotificationLedger
  private var finders: [Evaluator]
  /// Whether each wave lists its removals as values too (`explain`).
  public var recordsRemovals = false
  /// Whether each wave gives its pairs' fields (not when only counts are
  /// kept: `eval --summary-only`).
  public var buildsFields = true

  /// A judge for `index` (which must turn notification groups on), with a
  /// fresh ledger.
  public init(index: Index, caps: AppSettings.NotificationGroups, threads: Int) {
    self.index = index
    ledger = NotificationLedger(caps: caps, partitions: threads, users: index.users.count)
    finders = (0..<max(1, threads)).map { _ in Evaluator(index: index, output: .deliveredPairs) }
  }

  /// Carries `previous`'s state over to this judge's index, by user id and
  /// channel id (a stream's snapshot reload).
  public func inherit(from previous: NotificationJudge) {
    ledger = previous.ledger.rekeyed(from: previous.index, to: index, partitions: finders.count)
  }

  /// The notifications of `batches` (cut by `plan` into chunks in input
  /// order; `throttled` per batch from rule 8), and their read lines'
  /// updates; updates the ledger.
  public func judge(
    _ batches: [MessageBatch], plan: [(batch: Int, messages: Range<Int>)],
    throttled: [ThrottledMembers]
  ) -> NotificationWave {
    let delivered = runChunks(count: plan.count, workers: &finders, empty: Delivered()) {
      finder, k in
      var result = ChunkResult(gateways: finder.index.gateways.count)
      let chunk = plan[k]
      finder.evaluate(
        batches[chunk.batch], messages: chunk.messages, throttled: throttled[chunk.batch],
        into: &result)
      return Delivered(
        users: result.deliveredUsers, triggers: result.deliveredTriggers,
        deliverAt: result.deliveredAt, ends: result.deliveredEnds)
    }
    // Plan chunks by batch (the plan is in input order).
    var chunksByBatch = [[Int]](repeating: [], count: batches.count)
    for (k, chunk) in plan.enumerated() { chunksByBatch[chunk.batch].append(k) }
    let chunksOf = chunksByBatch
    let ledger = ledger
    let recordsRemovals = recordsRemovals
    let buildsFields = buildsFields
    let index = index
    let walked = runChunks(count: ledger.partitions.count, workers: finders.count, empty: Walk()) {
      p in
      var walk = Walk()
      ledger.partitions[p].walk { state in
        var removed: [Int64] = []
        var cancelled: [Int64] = []
        func read(_ reads: ReadLines, _ r: Int) {
          let u = reads.user[r]
          let channel = reads.channel[r]
          guard u >= 0, ledger.partition(ofUser: u) == p,
            index.memberSlot(user: u, channel: Int(channel)) != nil
          else { return }
          removed.removeAll(keepingCapacity: true)
          cancelled.removeAll(keepingCapacity: true)
          let badge = state.read(
            user: u, channel: channel, at: reads.ts[r], removed: &removed, cancelled: &cancelled)
          guard !removed.isEmpty else { return }
          if recordsRemovals {
            walk.removals.append(
              Removal(
                line: reads.lines[r], idJSON: Array(reads.idJSON[r]), user: u, ts: reads.ts[r],
                removed: removed, cancelled: cancelled, badge: badge))
          }
          walk.updateLines.append(reads.lines[r])
          walk.updates += #"{"line":"#.utf8
          JSONText.appendDecimal(Int64(reads.lines[r]), to: &walk.updates)
          walk.updates += #","id":"#.utf8
          walk.updates += reads.idJSON[r]
          walk.updates += #","user":"#.utf8
          walk.updates += index.userJSON[Int(u)]
          walk.updates += #","channel":"#.utf8
          index.channels.pool.withBytes(Int(channel)) {
            JSONText.appendQuoted($0, to: &walk.updates)
          }
          walk.updates += #","ts":"#.utf8
          JSONText.appendDecimal(reads.ts[r], to: &walk.updates)
          walk.updates += #","removed":"#.utf8
          appendIDs(removed[...], to: &walk.updates)
          walk.updates += #","cancelled":"#.utf8
          appendIDs(cancelled[...], to: &walk.updates)
          walk.updates += #","badge":"#.utf8
          JSONText.appendDecimal(badge, to: &walk.updates)
          walk.updates += "}\n".utf8
          walk.updateEnds.append(walk.updates.count)
        }
        var message = 0
        for (b, batch) in batches.enumerated() {
          let reads = batch.reads
          var r = 0
          for k in chunksOf[b] {
            var start = 0
            for (j, m) in plan[k].messages.enumerated() {
              while r < reads.count && reads.lines[r] < batch.lines[m] {
                read(reads, r)
                r += 1
              }
              let end = Int(delivered[k].ends[j])
              defer { start = end }
              let channel = batch.channel[m]
              let users = delivered[k].users
              for i in start..<end where ledger.partition(ofUser: users[i]) == p {
                let u = users[i]
                let note = state.add(
                  user: u, channel: channel, trigger: delivered[k].triggers[i], ts: batch.ts[m],
                  deliverAt: delivered[k].deliverAt[i], hides: &walk.hides)
                guard buildsFields else {
                  walk.hides.removeAll(keepingCapacity: true)
                  continue
                }
                walk.messages.append(Int32(message &+ m))
                walk.users.append(u)
                walk.group.append(note.group)
                walk.notification.append(note.id)
                walk.badge.append(note.badge)
                walk.hideEnds.append(Int32(walk.hides.count))
              }
            }
          }
          while r < reads.count {
            read(reads, r)
            r += 1
          }
          message += batch.count
        }
      }
      return walk
    }
    return NotificationWave(
      fields: buildsFields
        ? Self.fields(of: batches, from: walked)
        : [NotificationFields](repeating: NotificationFields(), count: batches.count),
      updates: Self.updates(from: walked),
      reads: batches.reduce(0) { $0 + $1.reads.count },
      removals: walked.flatMap(\.removals).sorted { $0.line < $1.line })
  }

  /// Each batch's fields, the partitions' pairs merged per message by user.
  private static func fields(of batches: [MessageBatch], from walked: [Walk])
    -> [NotificationFields]
  {
    var next = [Int](repeating: 0, count: walked.count)
    var message: Int32 = 0
    return batches.map { batch in
      var fields = NotificationFields()
      fields.starts.reserveCapacity(batch.count + 1)
      for _ in 0..<batch.count {
        while true {
          // The partition whose next pair of this message has the lowest user.
          var best = -1
          for p in walked.indices where next[p] < walked[p].messages.count {
            let i = next[p]
            guard walked[p].messages[i] == message else { continue }
            if best < 0 || walked[p].users[i] < walked[best].users[next[best]] { best = p }
          }
          guard best >= 0 else { break }
          let w = walked[best]
          let i = next[best]
          fields.users.append(w.users[i])
          fields.group.append(w.group[i])
          fields.notification.append(w.notification[i])
          fields.badge.append(w.badge[i])
          fields.hides += w.hides[(i == 0 ? 0 : Int(w.hideEnds[i - 1]))..<Int(w.hideEnds[i])]
          fields.hideEnds.append(Int32(fields.hides.count))
          next[best] += 1
        }
        fields.starts.append(Int32(fields.users.count))
        message += 1
      }
      return fields
    }
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

  /// One chunk's delivered pairs, and per message their end.
  private struct Delivered: Sendable {
    var users: [Int32] = []
    var triggers: [Trigger] = []
    var deliverAt: [Int64] = []
    var ends: [Int32] = []
  }

  /// One partition's notifications of a wave, in input order (messages
  /// numbered in the wave), and its update lines with their line numbers.
  private struct Walk: Sendable {
    var messages: [Int32] = []
    var users: [Int32] = []
    var group: [Int64] = []
    var notification: [Int64] = []
    var badge: [Int64] = []
    var hideEnds: [Int32] = []
    var hides: [Int64] = []
    var updates: [UInt8] = []
    var updateLines: [Int] = []
    var updateEnds: [Int] = []
    var removals: [Removal] = []
  }
}
