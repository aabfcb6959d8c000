import FanoutModel

/// The output lines: delivery lines per gateway (a message's recipients on
/// that gateway) and decision lines, built from fixed fragments and the
/// index's pre-encoded JSON, with contract v3's notification fields.
extension Evaluator {
  /// `{"message":…,"channel":…,"ts":…,"kind":…,"recipients":[` for message m.
  func buildLinePrefix(_ batch: MessageBatch, _ m: Int, _ channel: Int) {
    linePrefix.removeAll(keepingCapacity: true)
    appendLineNumber(batch, m, to: &linePrefix)
    linePrefix += #""message":"#.utf8
    linePrefix += batch.idJSON[m]
    linePrefix += #","channel":"#.utf8
    JSONText.appendQuoted(UnsafeRawBufferPointer(columns.channelNames[channel]), to: &linePrefix)
    linePrefix += #","ts":"#.utf8
    JSONText.appendDecimal(batch.ts[m], to: &linePrefix)
    linePrefix += Self.kindAndRecipients[Int(batch.kind[m].rawValue)]
  }

  /// `{"message":…,"user":` for message m's decision lines.
  func buildDecisionPrefix(_ batch: MessageBatch, _ m: Int) {
    decisionPrefix.removeAll(keepingCapacity: true)
    appendLineNumber(batch, m, to: &decisionPrefix)
    decisionPrefix += #""message":"#.utf8
    decisionPrefix += batch.idJSON[m]
    decisionPrefix += #","user":"#.utf8
  }

  /// `{`, or `{"line":N,` with `writesLineNumbers`.
  func appendLineNumber(_ batch: MessageBatch, _ m: Int, to bytes: inout [UInt8]) {
    bytes.append(UInt8(ascii: "{"))
    guard writesLineNumbers else { return }
    bytes += #""line":"#.utf8
    JSONText.appendDecimal(Int64(batch.lines[m]), to: &bytes)
    bytes.append(UInt8(ascii: ","))
  }

  /// `,"kind":"…","recipients":[` per `MessageKind`.
  static let kindAndRecipients = FixedStrings(
    MessageKind.allCases.map { #","kind":"\#($0.name)","recipients":["# })

  /// `,"trigger":"…","preview":…` per trigger and preview, then `}`
  /// (delivered at ts), `,"deliver_at":` (deferred) or nothing (notification
  /// fields follow).
  static let recipientSuffixes = FixedStrings(
    Trigger.allCases.flatMap { trigger in
      [false, true].flatMap { preview in
        ["}", #","deliver_at":"#, ""].map { end in
          #","trigger":"\#(trigger.name)","preview":\#(preview)\#(end)"#
        }
      }
    })

  /// The current pair's recipient entries end alike on every device: the
  /// trigger and preview, a deferred pair's `deliver_at`, contract v3's
  /// fields, `}` — made once per pair (`findPairNote` first), each device's
  /// entry then its JSON and one copy.
  @inline(__always)
  func makeRecipientTail(trigger: Trigger, preview: Bool, deferredTo: Int64?) {
    let suffix = (Int(trigger.rawValue) &* 2 &+ (preview ? 1 : 0)) &* 3
    if deferredTo == nil && pairNote < 0 {
      fixedRecipientTail = suffix
      return
    }
    fixedRecipientTail = -1
    recipientTail.removeAll()
    if let deferredTo {
      recipientTail.append(contentsOf: Self.recipientSuffixes[suffix &+ 1])
      recipientTail.appendDecimal(deferredTo)
    } else {
      recipientTail.append(contentsOf: Self.recipientSuffixes[suffix &+ 2])
    }
    if pairNote >= 0 { notes.appendFields(pairNote, to: &recipientTail) }
    recipientTail.append(UInt8(ascii: "}"))
  }

  /// One device's recipient entry in its gateway's line for the message.
  @inline(__always)
  func appendDelivery(device d: Int, gateway g: Int, sign: Int, _ result: inout ChunkResult) {
    scratch.deliveries[g] &+= sign
    guard writeLines else { return }
    if scratch.gatewayStamp[g] != stamp {
      scratch.gatewayStamp[g] = stamp
      openGateways.append(g)
      result.gatewayLines[g] += linePrefix
    } else {
      result.gatewayLines[g].append(UInt8(ascii: ","))
    }
    result.gatewayLines[g].append(contentsOf: columns.deviceJSON[d])
    if fixedRecipientTail >= 0 {
      result.gatewayLines[g].append(contentsOf: Self.recipientSuffixes[fixedRecipientTail])
    } else {
      result.gatewayLines[g].append(contentsOf: recipientTail.bytes)
    }
  }

  /// Ends the current message's line in each gateway it was delivered to.
  @inline(__always)
  func closeGatewayLines(_ result: inout ChunkResult) {
    for g in openGateways { result.gatewayLines[g] += "]}\n".utf8 }
    openGateways.removeAll(keepingCapacity: true)
  }

  /// Contract v3: finds the notification of the delivered pair of user `u`
  /// (the next of the message's that is `u`'s): `pairNote`, −1 when it has
  /// none (a pair that will not be delivered, or that rule 8 throttles).
  @inline(__always)
  func findPairNote(_ u: Int32) {
    pairNote = -1
    guard writesNotes else { return }
    while !noteCursor.isEmpty && notes.notes[noteCursor.lowerBound].user < u {
      noteCursor = (noteCursor.lowerBound &+ 1)..<noteCursor.upperBound
    }
    let k = noteCursor.lowerBound
    guard !noteCursor.isEmpty, notes.notes[k].user == u, notes.notes[k].id != 0 else { return }
    pairNote = k
  }

  static let decisionSuffix = (
    delivered: FixedStrings(Trigger.allCases.map { #","deliver":true,"trigger":"\#($0.name)""# }),
    suppressed: FixedStrings(
      Reason.allCases.map { #","deliver":false,"reason":"\#($0.name)"}\#n"# })
  )

  /// The pair's decision line; a deferred pair's carries `deliver_at`.
  @inline(__always)
  func appendDecision(
    user u: Int, _ verdict: Verdict, ts: Int64, _ result: inout ChunkResult
  ) {
    result.decisionLines += decisionPrefix
    result.decisionLines.append(contentsOf: columns.userJSON[u])
    if let reason = verdict.reason {
      result.decisionLines += Self.decisionSuffix.suppressed[Int(reason.rawValue)]
      return
    }
    result.decisionLines += Self.decisionSuffix.delivered[Int(verdict.trigger.rawValue)]
    if verdict.deliverAt > ts {
      result.decisionLines += #","deliver_at":"#.utf8
      JSONText.appendDecimal(verdict.deliverAt, to: &result.decisionLines)
    }
    if pairNote >= 0 { notes.appendFields(pairNote, to: &result.decisionLines) }
    result.decisionLines += "}\n".utf8
  }
}
