import FanoutIndex
import FanoutModel
import FanoutTime
import FanoutTraffic

/// Evaluates messages against one index. Cheap to create; create one per
/// worker, since it owns per-message scratch space.
public struct Evaluator {
  /// What an evaluation writes besides its counters.
  public enum Output: Sendable {
    /// Counters only: the decisions are made, no line is built.
    case counts
    /// Delivery lines per gateway.
    case deliveries
    /// Delivery lines and one decision line per pair.
    case deliveriesAndDecisions
    /// Counters and one `Outcome` record per pair, for comparing two snapshots.
    case outcomes
  }

  public let index: Index
  public let output: Output
  private let writeLines: Bool
  private let writeDecisions: Bool
  private let recordOutcomes: Bool
  private let columns: IndexColumns
  private let scratch: EvaluatorScratch
  private var openGateways: [Int] = []
  private var linePrefix: [UInt8] = []
  private var decisionPrefix: [UInt8] = []
  private var stamp = 0

  public init(index: Index, output: Output) {
    self.index = index
    self.output = output
    writeLines = output == .deliveries || output == .deliveriesAndDecisions
    writeDecisions = output == .deliveriesAndDecisions
    recordOutcomes = output == .outcomes
    columns = IndexColumns(index)
    scratch = EvaluatorScratch(zones: index.zones.count, gateways: index.gateways.count)
  }

  /// Evaluates `messages` of `batch` in order, appending to `result`.
  ///
  /// - Complexity: O(pairs + deliveries); allocates only to grow output buffers.
  public mutating func evaluate(
    _ batch: MessageBatch, messages: Range<Int>, into result: inout ChunkResult
  ) {
    batch.mentions.withUnsafeBufferPointer { mentions in
      for m in messages { evaluateMessage(batch, m, mentions, &result) }
    }
    for g in 0..<index.gateways.count {
      result.counters.deliveries[g] += scratch.deliveries[g]
      result.counters.blocked[g] += scratch.blocked[g]
      scratch.deliveries[g] = 0
      scratch.blocked[g] = 0
    }
    for r in 0..<Reason.allCases.count {
      result.counters.suppressed[r] += scratch.suppressed[r]
      scratch.suppressed[r] = 0
    }
  }

  private mutating func evaluateMessage(
    _ batch: MessageBatch, _ m: Int, _ mentions: UnsafeBufferPointer<Int32>,
    _ result: inout ChunkResult
  ) {
    stamp += 1
    let c = columns
    let channel = Int(batch.channel[m])
    let ts = batch.ts[m]
    let kind = batch.kind[m]
    let force = batch.force[m]
    let sender = batch.sender[m]
    let replyTo = batch.replyTo[m]
    let mentionAll = batch.mentionAll[m]
    let category = Int(batch.category[m])
    var mentionCursor = Int(batch.mentionOffsets[m])
    let mentionEnd = Int(batch.mentionOffsets[m + 1])
    let gatewayCount = index.gateways.count

    if writeLines { buildLinePrefix(batch, m, channel) }
    if writeDecisions {
      decisionPrefix.removeAll(keepingCapacity: true)
      decisionPrefix += #"{"message":"#.utf8
      decisionPrefix += batch.idJSON[m]
      decisionPrefix += #","user":"#.utf8
    }
    var pairs = 0
    var delivered = 0

    for slot in c.channelMembers[channel]..<c.channelMembers[channel + 1] {
      let u = c.memberUser[slot]
      if u == sender { continue }
      pairs &+= 1
      let settings = c.memberSettings[slot]
      var reason: Reason? = nil
      var trigger = Trigger.message

      if !force && isSnoozed(slot, ts) {
        reason = .snoozed
      } else if !force && isInDND(Int(u), ts) {
        reason = .dnd
      } else {
        while mentionCursor < mentionEnd && mentions[mentionCursor] < u { mentionCursor &+= 1 }
        let mentioned =
          settings.mentionNotifications
          && (mentionAll || replyTo == u
            || (mentionCursor < mentionEnd && mentions[mentionCursor] == u))
        switch kind {
        case .call:
          if settings.callsOn { trigger = .call } else { reason = .muted }
        case .pinned where settings.pinnedNotifications:
          if settings.chatLevel == .none { reason = .muted } else { trigger = .pinned }
        case .message, .pinned:
          switch settings.chatLevel {
          case .all: trigger = mentioned ? .mention : .message
          case .mentions: if mentioned { trigger = .mention } else { reason = .notMentioned }
          case .none: reason = .muted
          }
        }
      }

      if reason == nil {
        let first = Int(c.userDevices[Int(u)])
        let end = Int(c.userDevices[Int(u) + 1])
        if first == end {
          reason = .noDevice
        } else {
          var passed = 0
          for d in first..<end {
            if passesGate(device: d, user: Int(u), category: category, gateways: gatewayCount) {
              appendDelivery(device: d, trigger: trigger, preview: settings.showPreview, &result)
              passed &+= 1
            } else {
              scratch.blocked[Int(c.deviceGateway[d])] &+= 1
            }
          }
          if passed == 0 { reason = .optedOut }
        }
      }

      if let reason {
        scratch.suppressed[Int(reason.rawValue)] &+= 1
      } else {
        delivered &+= 1
      }
      if writeDecisions { appendDecision(user: Int(u), reason: reason, trigger: trigger, &result) }
      if recordOutcomes {
        result.pairUsers.append(u)
        result.pairOutcomes.append(reason.map(Outcome.suppressed) ?? .delivered(trigger))
      }
    }
    if recordOutcomes { result.messagePairEnds.append(Int32(result.pairUsers.count)) }
    result.counters.messages += 1
    result.counters.pairs += pairs
    result.counters.delivered += delivered

    if writeLines {
      for g in openGateways { result.gatewayLines[g] += "]}\n".utf8 }
      openGateways.removeAll(keepingCapacity: true)
    }
  }

  /// `{"message":…,"channel":…,"ts":…,"kind":…,"recipients":[` for message m.
  private mutating func buildLinePrefix(_ batch: MessageBatch, _ m: Int, _ channel: Int) {
    linePrefix.removeAll(keepingCapacity: true)
    linePrefix += #"{"message":"#.utf8
    linePrefix += batch.idJSON[m]
    linePrefix += #","channel":"#.utf8
    index.channels.pool.withBytes(channel) { JSONText.appendQuoted($0, to: &linePrefix) }
    linePrefix += #","ts":\#(batch.ts[m]),"kind":"\#(batch.kind[m].name)","recipients":["#.utf8
  }

  /// Rule 1: ts lies in a snooze window of the user, scope or channel level.
  @inline(__always)
  private func isSnoozed(_ slot: Int, _ ts: Int64) -> Bool {
    let group = Int(columns.memberSnooze[slot])
    if group < 0 { return false }
    for w in Int(columns.snoozeGroups[group])..<Int(columns.snoozeGroups[group + 1])
    where columns.snoozeBounds[2 * w] <= ts && ts < columns.snoozeBounds[2 * w + 1] {
      return true
    }
    return false
  }

  /// Rule 2: the local minute of the week lies in the user's DND pattern.
  @inline(__always)
  private func isInDND(_ u: Int, _ ts: Int64) -> Bool {
    let pattern = Int(columns.userDND[u])
    if pattern < 0 { return false }
    let zone = Int(columns.userZone[u])
    if scratch.zoneStamp[zone] != stamp { cacheLocalMinute(zone: zone, ts: ts) }
    let minute = scratch.zoneMinute[zone]
    return columns.dndWords[pattern &* DNDPattern.wordCount &+ minute &>> 6]
      & (1 &<< UInt64(minute & 63)) != 0
  }

  @inline(never)
  private func cacheLocalMinute(zone: Int, ts: Int64) {
    scratch.zoneStamp[zone] = stamp
    scratch.zoneMinute[zone] = LocalTime.minuteOfWeek(
      utcMillis: ts, offsetSeconds: index.zones[zone].offsetSeconds(atMillis: ts))
  }

  /// The gateway gate for one device of the recipient.
  @inline(__always)
  private func passesGate(device d: Int, user u: Int, category cat: Int, gateways: Int) -> Bool {
    let c = columns
    let g = Int(c.deviceGateway[d])
    if cat >= 0 && c.categoryGatewayMandatory[cat &* gateways &+ g] { return true }
    if c.deviceRestricted[d] { return false }
    if cat < 0 { return true }
    var whole: Preference? = nil
    var onGateway: Preference? = nil
    for r in Int(c.userCategoryPrefs[u])..<Int(c.userCategoryPrefs[u + 1])
    where c.categoryPrefCategory[r] == cat {
      let prefGateway = Int(c.categoryPrefGateway[r])
      if prefGateway < 0 {
        whole = c.categoryPref[r]
      } else if prefGateway == g {
        onGateway = c.categoryPref[r]
      }
    }
    let categoryPreference = c.categoryMandatory[cat] ? .optIn : (whole ?? c.categoryDefault[cat])
    return categoryPreference == .optIn && onGateway != .optOut
  }

  private static let recipientSuffix: [[UInt8]] = Trigger.allCases.flatMap { trigger in
    [false, true].map { Array(#","trigger":"\#(trigger.name)","preview":\#($0)}"#.utf8) }
  }

  @inline(__always)
  private mutating func appendDelivery(
    device d: Int, trigger: Trigger, preview: Bool, _ result: inout ChunkResult
  ) {
    let g = Int(columns.deviceGateway[d])
    scratch.deliveries[g] &+= 1
    guard writeLines else { return }
    if scratch.gatewayStamp[g] != stamp {
      scratch.gatewayStamp[g] = stamp
      openGateways.append(g)
      result.gatewayLines[g] += linePrefix
    } else {
      result.gatewayLines[g].append(UInt8(ascii: ","))
    }
    result.gatewayLines[g].append(contentsOf: columns.deviceJSON[d])
    result.gatewayLines[g] += Self.recipientSuffix[Int(trigger.rawValue) * 2 + (preview ? 1 : 0)]
  }

  private static let decisionSuffix: (delivered: [[UInt8]], suppressed: [[UInt8]]) = (
    Trigger.allCases.map { Array(#","deliver":true,"trigger":"\#($0.name)"}\#n"#.utf8) },
    Reason.allCases.map { Array(#","deliver":false,"reason":"\#($0.name)"}\#n"#.utf8) }
  )

  @inline(__always)
  private func appendDecision(
    user u: Int, reason: Reason?, trigger: Trigger, _ result: inout ChunkResult
  ) {
    result.decisionLines += decisionPrefix
    result.decisionLines.append(contentsOf: columns.userJSON[u])
    if let reason {
      result.decisionLines += Self.decisionSuffix.suppressed[Int(reason.rawValue)]
    } else {
      result.decisionLines += Self.decisionSuffix.delivered[Int(trigger.rawValue)]
    }
  }
}
