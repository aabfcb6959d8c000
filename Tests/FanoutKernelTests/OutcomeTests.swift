import Testing

@testable import FanoutModel

@Suite("Outcome: one byte per pair")
struct OutcomeTests {
  @Test("deliveries first, one per trigger, then reasons in rule order, then not_member")
  func layout() {
    #expect(Int(Outcome.triggers) == Trigger.allCases.count)
    for trigger in Trigger.allCases {
      let outcome = Outcome.delivered(trigger)
      #expect(outcome.isDelivered && outcome.reason == nil && outcome.name == trigger.name)
    }
    for reason in Reason.allCases {
      let outcome = Outcome.suppressed(reason)
      #expect(!outcome.isDelivered && outcome.reason == reason && outcome.name == reason.name)
    }
    #expect(!Outcome.notMember.isDelivered && Outcome.notMember.name == "not_member")
    #expect(Outcome.allCases.count == Trigger.allCases.count + Reason.allCases.count + 1)
    #expect(Set(Outcome.allCases.map(\.name)).count == Outcome.allCases.count)
  }
}
