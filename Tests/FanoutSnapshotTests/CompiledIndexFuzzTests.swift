import FanoutIndex
import FanoutSnapshot
import FanoutTestSupport
import Foundation
import Testing

/// A seeded mutator over valid compiled index files: each input changes a
/// few values or bytes of one section and computes its checksum again (as
/// an attacker would), then is loaded and, if accepted, evaluated. No input
/// may crash or read out of bounds (the suite's debug build checks every
/// buffer access); a refusal is the expected outcome for most.
///
/// `FANOUT_FUZZ_INPUTS` sets how many inputs (the suite's default keeps it
/// to seconds; a longer run is a matter of raising it).
@Suite("the compiled index reader under a seeded mutator")
struct CompiledIndexFuzzTests {
  static let inputs =
    ProcessInfo.processInfo.environment["FANOUT_FUZZ_INPUTS"].flatMap { Int($0) } ?? 1500

  @Test("no mutated file crashes the reader or the kernel", arguments: [11, 12] as [UInt64])
  func mutate(seed: UInt64) throws {
    let world = RandomWorld(seed: seed, messages: 60, v2: true)
    let snapshot = world.makeSnapshot()
    let compiled = makeTemporaryDirectory("fanout-fuzz") + "/x.fanout-index"
    _ = try SnapshotLoader.compile(path: snapshot, output: compiled, cache: nil)
    let pristine = try #require(CompiledIndexEditor(path: compiled))
    #expect((try? Scenario(snapshot: compiled, messages: world.messages)) != nil)
    var random = SeededRandom(seed: seed)
    let interesting: [Int64] = [
      0, -1, 1, 2, Int64(Int32.max), Int64(Int32.min), Int64.max, 255, 65_535,
    ]
    var accepted = 0
    for _ in 0..<Self.inputs / 2 {
      var file = pristine
      // The index's sections (after the snapshot's description), non-empty ones.
      let sections = (7..<file.payloads.count).filter { !file.payloads[$0].isEmpty }
      let section = sections[Int(random.next() % UInt64(sections.count))]
      let size = file.payloads[section].count
      for _ in 0..<(1 + Int(random.next() % 3)) {
        switch random.next() % 4 {
        case 0:  // one byte
          file.setByte(
            section, Int(random.next() % UInt64(size)), to: UInt8(truncatingIfNeeded: random.next())
          )
        case 1 where size >= 4:  // a 32-bit value: an edge, or a neighbour's
          let slot = Int(random.next() % UInt64(size / 4))
          let value = interesting[Int(random.next() % UInt64(interesting.count))]
          file.set(section, slot, to: Int32(truncatingIfNeeded: value))
        case 2 where size >= 8:  // a 64-bit value
          let slot = Int(random.next() % UInt64(size / 8))
          let value = interesting[Int(random.next() % UInt64(interesting.count))]
          file.set(section, slot, to: value &+ Int64(random.next() % 3) &- 1)
        default:  // a small step on a 32-bit value
          if size >= 4 {
            let slot = Int(random.next() % UInt64(size / 4))
            let old = file.values(section, as: Int32.self)[slot]
            file.set(section, slot, to: old &+ Int32(truncatingIfNeeded: random.next() % 5) &- 2)
          }
        }
      }
      file.write(to: compiled)
      if (try? Scenario(snapshot: compiled, messages: world.messages)) != nil { accepted += 1 }
    }
    // Some changes keep a valid file (a token's bytes, a timestamp): the
    // kernel ran on those too.
    #expect(accepted > 0)
  }
}
