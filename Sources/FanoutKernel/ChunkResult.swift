/// FanoutKernel owns the evaluation rules: for each message of a batch and
/// each member of its channel, the rule chain (silent → sender_muted →
/// snoozed → dnd → muted / not_mentioned → active → no_device → opted_out
/// → throttled), and the delivery lines and
/// decision lines that follow. It sees only the index and parsed batches —
/// no SQLite, no JSON parsing, no files — and allocates nothing per pair.
import FanoutModel

/// Counters of one chunk (or of a whole run, once merged).
public struct Counters: Sendable, Equatable {
  public var messages = 0
  public var pairs = 0
  public var delivered = 0
  /// Delivered pairs whose delivery time is later than the message's ts.
  public var deferred = 0
  /// Deliveries per gateway row.
  public var deliveries: [Int]
  /// Devices per gateway row that the gateway gate blocked, for pairs that
  /// reached it (delivered on another device, or opted_out).
  public var blocked: [Int]
  /// Suppressed pairs per `Reason`.
  public var suppressed = [Int](repeating: 0, count: Reason.allCases.count)

  public init(gateways: Int) {
    deliveries = [Int](repeating: 0, count: gateways)
    blocked = deliveries
  }

  public mutating func add(_ other: Counters) {
    messages += other.messages
    pairs += other.pairs
    delivered += other.delivered
    deferred += other.deferred
    for g in deliveries.indices {
      deliveries[g] += other.deliveries[g]
      blocked[g] += other.blocked[g]
    }
    for r in suppressed.indices { suppressed[r] += other.suppressed[r] }
  }
}

/// What evaluating a run of messages produced: NDJSON bytes per gateway
/// (one line per message with deliveries there), decision lines if asked
/// for, and counters.
public struct ChunkResult: Sendable {
  public var gatewayLines: [[UInt8]]
  public var decisionLines: [UInt8] = []
  /// With `.outcomes`: each pair's user row and outcome, in output order,
  /// and per message the end of its pairs (chunk-relative).
  public var pairUsers: [Int32] = []
  public var pairOutcomes: [Outcome] = []
  /// With `.outcomes`: per pair, the UTC hour (0–23) it is delivered at —
  /// its message's hour unless deferral or presence delay it.
  public var pairDeliveryHours: [UInt8] = []
  /// With `.outcomes` and `Evaluator.recordsLocalHours`: per pair, the
  /// recipient's local hour (0–23) at its message's ts.
  public var pairLocalHours: [UInt8] = []
  public var messagePairEnds: [Int32] = []
  /// A side that decides again only some of another side's pairs
  /// (`Evaluator.redecideQuietHours`, `redecideQuietPairs`,
  /// `listThrottled`): each pair it decided otherwise, as its place among
  /// the other side's pairs of the chunk, with its outcome and delivery
  /// hour here (`listRedecided`); every other pair is the other side's.
  public var redecidedPairs: [Int32] = []
  public var redecidedOutcomes: [Outcome] = []
  public var redecidedDeliveryHours: [UInt8] = []
  /// With `.audit`: per pair, its delivery time (the message's ts unless
  /// deferral or presence delay it; meaningful for delivered pairs), and
  /// the end of its delivered devices' rows in `pairDevices` (their
  /// gateways' rows beside them, in `pairDeviceGateways`).
  public var pairDeliverAt: [Int64] = []
  public var pairDeviceEnds: [Int32] = []
  public var pairDevices: [Int32] = []
  public var pairDeviceGateways: [UInt16] = []
  /// With `.deliveredPairs` or `.throttleCandidates`: each message's pairs
  /// delivered before rule 8 (all, or those with trigger 'message').
  public var delivered = DeliveredPairs()
  public var counters: Counters

  public init(gateways: Int) {
    gatewayLines = [[UInt8]](repeating: [], count: gateways)
    counters = Counters(gateways: gateways)
  }

  /// Lists pair `i` of `other` (its place among `other`'s pairs of the
  /// chunk) as decided `outcome`, delivered at `deliveryHour`, unless
  /// `other` holds it so already.
  @inline(__always)
  mutating func listRedecided(
    _ i: Int, of other: ChunkResult, _ outcome: Outcome, deliveryHour: UInt8
  ) {
    guard outcome != other.pairOutcomes[i] || deliveryHour != other.pairDeliveryHours[i] else {
      return
    }
    redecidedPairs.append(Int32(truncatingIfNeeded: i))
    redecidedOutcomes.append(outcome)
    redecidedDeliveryHours.append(deliveryHour)
  }

  /// Empties the result for the next chunk, keeping its buffers' capacity:
  /// a worker that reuses one result stops growing and faulting in fresh
  /// line buffers once it has seen its largest chunk.
  public mutating func removeAll() {
    for g in gatewayLines.indices { gatewayLines[g].removeAll(keepingCapacity: true) }
    decisionLines.removeAll(keepingCapacity: true)
    pairUsers.removeAll(keepingCapacity: true)
    pairOutcomes.removeAll(keepingCapacity: true)
    pairDeliveryHours.removeAll(keepingCapacity: true)
    pairLocalHours.removeAll(keepingCapacity: true)
    messagePairEnds.removeAll(keepingCapacity: true)
    redecidedPairs.removeAll(keepingCapacity: true)
    redecidedOutcomes.removeAll(keepingCapacity: true)
    redecidedDeliveryHours.removeAll(keepingCapacity: true)
    pairDeliverAt.removeAll(keepingCapacity: true)
    pairDeviceEnds.removeAll(keepingCapacity: true)
    pairDevices.removeAll(keepingCapacity: true)
    pairDeviceGateways.removeAll(keepingCapacity: true)
    delivered = DeliveredPairs()
    counters = Counters(gateways: gatewayLines.count)
  }
}

/// The pairs of a chunk's messages that the rules deliver before rule 8
/// (the input of the ledgers' input-order passes: `Ledgers`), in
/// evaluation order — by message, then by user row.
public struct DeliveredPairs: Sendable {
  public var slots: [Int32] = []
  public var users: [Int32] = []
  public var triggers: [Trigger] = []
  public var deliverAt: [Int64] = []
  /// Per message, where its pairs end.
  public var ends: [Int32] = []

  public init() {}

  @inline(__always)
  mutating func append(slot: Int, user: Int32, _ verdict: Evaluator.Verdict) {
    slots.append(Int32(truncatingIfNeeded: slot))
    users.append(user)
    triggers.append(verdict.trigger)
    deliverAt.append(verdict.deliverAt)
  }

  @inline(__always)
  mutating func endMessage() { ends.append(Int32(truncatingIfNeeded: users.count)) }
}
