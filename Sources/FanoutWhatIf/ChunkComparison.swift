import FanoutEngine
import FanoutIndex
import FanoutKernel
import FanoutModel
import FanoutOutput
import FanoutTime
import FanoutTraffic

/// What comparing one chunk of messages produced; merged in chunk order.
struct ComparedChunk: Sendable {
  /// Per side.
  var counters: [Counters]
  /// `Outcome.allCases.count²` cells, row = A's outcome, column = B's.
  var transitions: [Int]
  var slices = SliceCounts()
  /// Per message of the chunk: its channel row, and its delivered pairs per side.
  var messageChannels: [Int32] = []
  var messageDelivered: [[Int32]] = [[], []]
  /// Per side: the user row of every delivered pair.
  var deliveredUsers: [[Int32]] = [[], []]
  /// `changes.ndjson.lz4` blocks for the changed pairs.
  var changeBlocks: [UInt8] = []
  var changedPairs = 0
  /// Every pair whose outcome changed: its user row, its channel row and
  /// its traffic line (the top users' and channels' examples).
  var changedUsers: [Int32] = []
  var changedChannels: [Int32] = []
  var changedLines: [Int] = []
  /// The first and last message's ts, for the days the traffic spans.
  var firstTs = Int64.max
  var lastTs = Int64.min

  init(gateways: [Int]) {
    counters = gateways.map(Counters.init(gateways:))
    transitions = [Int](repeating: 0, count: Outcome.allCases.count * Outcome.allCases.count)
  }
}

/// Evaluates chunks against A and each B (one for `fanout whatif`, one per
/// variant for a sweep) and compares each B with A pair by pair: A is
/// evaluated once. All indexes have the same users, channels and
/// categories (checked before), so one parsed batch and one set of rows
/// serve them all. Each worker keeps an evaluator per index for the run.
struct ChunkComparer: ChunkWork {
  /// A, then the Bs.
  let indexes: [Index]

  var empty: [ComparedChunk] { [] }

  func makeWorker() -> [Evaluator] {
    indexes.map { Evaluator(index: $0, output: .outcomes) }
  }

  private static let outcomeJSON = FixedStrings(Outcome.allCases.map { "\"\($0.name)\"" })

  /// Per B, its comparison with A.
  func evaluate(
    _ batch: MessageBatch, messages: Range<Int>, verdicts: [LedgerVerdicts],
    worker evaluators: inout [Evaluator]
  ) -> [ComparedChunk] {
    let results = indexes.indices.map { side in
      var result = ChunkResult(gateways: indexes[side].gateways.count)
      evaluators[side].evaluate(batch, messages: messages, verdicts: verdicts[side], into: &result)
      return result
    }
    return (1..<indexes.count).map { b in
      compare(batch, messages, [results[0], results[b]], [indexes[0], indexes[b]])
    }
  }

  /// One B's comparison with A (`results` and `indexes`: A's, then B's).
  private func compare(
    _ batch: MessageBatch, _ messages: Range<Int>, _ results: [ChunkResult], _ indexes: [Index]
  ) -> ComparedChunk {
    var chunk = ComparedChunk(gateways: indexes.map(\.gateways.count))
    chunk.counters = results.map(\.counters)
    var sides = [SideTally(.a, indexes[0]), SideTally(.b, indexes[1])]
    var changes: [UInt8] = []
    var start = [0, 0]

    for (k, m) in messages.enumerated() {
      let channel = Int(batch.channel[m])
      let ts = batch.ts[m]
      chunk.firstTs = min(chunk.firstTs, ts)
      chunk.lastTs = max(chunk.lastTs, ts)
      let utcHour = LocalTime.utcHour(millis: ts)
      sides[0].begin(channel: channel, ts: ts, message: k, utcHour: utcHour)
      sides[1].begin(channel: channel, ts: ts, message: k, utcHour: utcHour)

      // Walk both pair lists (each in user row order) together; a user in
      // one list only is a membership that the other snapshot lacks.
      let end = results.map { Int($0.messagePairEnds[k]) }
      var i = start[0]
      var j = start[1]
      while i < end[0] || j < end[1] {
        let userA = i < end[0] ? results[0].pairUsers[i] : Int32.max
        let userB = j < end[1] ? results[1].pairUsers[j] : Int32.max
        let user = min(userA, userB)
        var outcomeA = Outcome.notMember
        var outcomeB = Outcome.notMember
        if userA == user {
          outcomeA = results[0].pairOutcomes[i]
          sides[0].tally(
            user, outcomeA, deliveryHour: results[0].pairDeliveryHours[i], into: &chunk)
          i += 1
        }
        if userB == user {
          outcomeB = results[1].pairOutcomes[j]
          sides[1].tally(
            user, outcomeB, deliveryHour: results[1].pairDeliveryHours[j], into: &chunk)
          j += 1
        }
        chunk.transitions[
          Int(outcomeA.rawValue) * Outcome.allCases.count + Int(outcomeB.rawValue)] += 1
        if outcomeA != outcomeB {
          chunk.changedPairs += 1
          chunk.changedUsers.append(user)
          chunk.changedChannels.append(Int32(channel))
          chunk.changedLines.append(batch.lines[m])
          changes += #"{"message":"#.utf8
          changes += batch.idJSON[m]
          changes += #","user":"#.utf8
          changes += indexes[0].userJSON[Int(user)]
          changes += #","a":"#.utf8
          changes += Self.outcomeJSON[Int(outcomeA.rawValue)]
          changes += #","b":"#.utf8
          changes += Self.outcomeJSON[Int(outcomeB.rawValue)]
          changes += "}\n".utf8
        }
      }
      start = end
      chunk.messageChannels.append(Int32(channel))
      chunk.messageDelivered[0].append(sides[0].delivered)
      chunk.messageDelivered[1].append(sides[1].delivered)
    }
    chunk.changeBlocks = LZ4Frame.blocks(changes)
    return chunk
  }
}

/// Counts one side's pairs of the current message into the slices.
private struct SideTally {
  let side: Side
  let index: Index
  var localHour: LocalHourCache
  var kindSlice = 0
  var sizeSlice = 0
  var utcHour = 0
  var ts: Int64 = 0
  var message = 0
  /// Delivered pairs of the current message.
  var delivered: Int32 = 0

  init(_ side: Side, _ index: Index) {
    self.side = side
    self.index = index
    localHour = LocalHourCache(zones: index.zones)
  }

  mutating func begin(channel: Int, ts: Int64, message: Int, utcHour: Int) {
    kindSlice = Slice.kinds + Int(index.channelScope[channel].rawValue)
    let members = index.memberCount(of: channel)
    sizeSlice = Slice.sizes + Slice.sizeBucket(members: members)
    self.utcHour = Slice.utcHours + utcHour
    self.ts = ts
    self.message = message
    delivered = 0
  }

  @inline(__always)
  mutating func tally(
    _ user: Int32, _ outcome: Outcome, deliveryHour: UInt8, into chunk: inout ComparedChunk
  ) {
    let isDelivered = outcome.isDelivered
    let hour = localHour.hour(zone: index.zoneRow(ofUser: Int(user)), ts: ts, message: message)
    chunk.slices.count(side, kindSlice, delivered: isDelivered)
    chunk.slices.count(side, sizeSlice, delivered: isDelivered)
    chunk.slices.count(side, utcHour, delivered: isDelivered)
    chunk.slices.count(side, Slice.localHours + hour, delivered: isDelivered)
    chunk.slices.count(side, Slice.deliveryHours + Int(deliveryHour), delivered: isDelivered)
    if isDelivered {
      delivered += 1
      chunk.deliveredUsers[side.rawValue].append(user)
    }
  }
}

/// The recipient's local hour of a message's time, computed once per
/// (message, time zone).
private struct LocalHourCache {
  let zones: [ZoneTable]
  var stamp: [Int]
  var hours: [Int]

  init(zones: [ZoneTable]) {
    self.zones = zones
    stamp = [Int](repeating: -1, count: zones.count)
    hours = [Int](repeating: 0, count: zones.count)
  }

  mutating func hour(zone: Int, ts: Int64, message: Int) -> Int {
    if stamp[zone] != message {
      stamp[zone] = message
      let minute = LocalTime.minuteOfWeek(
        utcMillis: ts, offsetSeconds: zones[zone].offsetSeconds(atMillis: ts))
      hours[zone] = minute % 1440 / 60
    }
    return hours[zone]
  }
}
