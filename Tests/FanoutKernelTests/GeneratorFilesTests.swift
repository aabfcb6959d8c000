import FanoutGenerator
import FanoutTestSupport
import Foundation
import Testing

@Suite("fanout gen's files")
struct GeneratorFilesTests {
  /// `fanout gen` writes the traffic into a partial file of its output
  /// folder; should someone swap that file for a link, the link's target
  /// is not written.
  @Test("the traffic file is never written through a symbolic link")
  func trafficThroughLink() throws {
    let directory = makeTemporaryDirectory("fanout-gen-link")
    defer { try? FileManager.default.removeItem(atPath: directory) }
    let victim = directory + "/victim"
    try "keep me\n".write(toFile: victim, atomically: true, encoding: .utf8)
    let link = directory + "/traffic.ndjson"
    try FileManager.default.createSymbolicLink(atPath: link, withDestinationPath: victim)
    var options = GeneratorOptions(
      users: 10, messages: 5, seed: 1, profile: .chat, out: directory)
    options.trafficPath = link
    #expect(throws: (any Error).self) { try Generator.run(options) }
    #expect(readText(victim) == "keep me\n")
  }
}
