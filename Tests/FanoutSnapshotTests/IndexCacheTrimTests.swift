import FanoutTestSupport
import Foundation
import Testing

@testable import FanoutSnapshot

@Suite("the index cache's size bound")
struct IndexCacheTrimTests {
  @Test(
    "the least recently used files go first, until the folder fits; dead runs' files go too; no other file"
  )
  func trimsLeastRecentlyUsed() throws {
    let dir = makeTemporaryDirectory("fanout-cache")
    let files = FileManager.default
    func make(_ name: String, bytes: Int, ageSeconds: Double) throws {
      let path = dir + "/" + name
      #expect(files.createFile(atPath: path, contents: Data(count: bytes)))
      try files.setAttributes(
        [.modificationDate: Date(timeIntervalSinceNow: -ageSeconds)], ofItemAtPath: path)
    }
    // Cache files are named by their snapshot's fingerprint: 32 hex digits.
    let (a, b, c, d, e) = (
      String(repeating: "a", count: 32), String(repeating: "b", count: 32),
      String(repeating: "c", count: 32), String(repeating: "d", count: 32),
      String(repeating: "e", count: 32)
    )
    try make("\(a).fanout-index", bytes: 400, ageSeconds: 30)
    try make("\(b).fanout-index", bytes: 400, ageSeconds: 10)
    try make("\(c).fanout-index", bytes: 400, ageSeconds: 20)
    try make(".\(d).fanout-index.1.2.partial", bytes: 10, ageSeconds: 7200)
    try make(".\(e).fanout-index.3.4.partial", bytes: 10, ageSeconds: 5)
    try make("notes.txt", bytes: 5000, ageSeconds: 99999)
    // The user's own compiled files in the folder, however old, stay.
    try make("mine.fanout-index", bytes: 5000, ageSeconds: 99999)
    try make(".mine.fanout-index.1.2.partial", bytes: 10, ageSeconds: 99999)
    let kept = [".mine.fanout-index.1.2.partial", "mine.fanout-index", "notes.txt"]
    IndexCache(directory: dir, limitBytes: 1000).trim()
    #expect(
      listDirectory(dir).sorted()
        == ([".\(e).fanout-index.3.4.partial", "\(b).fanout-index", "\(c).fanout-index"] + kept)
        .sorted())
    IndexCache(directory: dir, limitBytes: 400).trim()
    #expect(
      listDirectory(dir).sorted()
        == ([".\(e).fanout-index.3.4.partial", "\(b).fanout-index"] + kept).sorted())
  }
}
