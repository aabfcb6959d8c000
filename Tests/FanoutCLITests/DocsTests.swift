import FanoutTestSupport
import Foundation
import Testing

/// Every ```sh block of the README, CONTRIBUTING and docs/, run as a reader
/// would paste it, so that the docs cannot drift from the binary.
///
/// Each page runs in a scratch copy of the repository's `datasets/`, with
/// `.build/release/fanout` being the binary under test and
/// `datasets/sample/snapshot.sqlite` built as `make demo` builds it; its
/// blocks run in order, each with `bash -e`, and must all succeed. A block
/// preceded by `<!-- docs-test: skip: REASON -->` is not run (the make
/// targets themselves, 1M-user data); the test prints each such block with
/// its reason.
@Suite("the docs' commands run")
struct DocsTests {
  struct Block: CustomStringConvertible {
    let page: String
    let line: Int
    let code: String
    let skip: String?
    var description: String { "\(page):\(line)" }
  }

  static let pages =
    ["README.md", "CONTRIBUTING.md"]
    + listDirectory(packageRoot.path + "/docs").filter { $0.hasSuffix(".md") }.map { "docs/" + $0 }

  static func blocks(of page: String) -> [Block] {
    let lines = readText(packageRoot.path + "/" + page).split(
      separator: "\n", omittingEmptySubsequences: false)
    var blocks: [Block] = []
    var i = 0
    while i < lines.count {
      guard lines[i] == "```sh" else {
        i += 1
        continue
      }
      let start = i
      var body: [Substring] = []
      i += 1
      while i < lines.count && lines[i] != "```" {
        body.append(lines[i])
        i += 1
      }
      let marker = start > 0 ? lines[start - 1] : ""
      let skip =
        marker.hasPrefix("<!-- docs-test: skip: ")
        ? String(marker.dropFirst("<!-- docs-test: skip: ".count).dropLast(" -->".count)) : nil
      blocks.append(
        Block(page: page, line: start + 1, code: body.joined(separator: "\n"), skip: skip))
      i += 1
    }
    return blocks
  }

  /// A scratch copy a reader's clone would look like after `make demo`.
  static func scratch() throws -> String {
    let dir = makeTemporaryDirectory("fanout-docs")
    try FileManager.default.copyItem(
      atPath: packageRoot.path + "/datasets", toPath: dir + "/datasets")
    try FileManager.default.createDirectory(
      atPath: dir + "/.build/release", withIntermediateDirectories: true)
    try FileManager.default.createSymbolicLink(
      atPath: dir + "/.build/release/fanout", withDestinationPath: fanoutExecutable)
    let sample = runProcess(
      "/bin/bash",
      [
        "-c",
        // As `make demo` builds it (removing one a previous `make` left in the clone).
        "cd '\(dir)' && rm -f datasets/*/snapshot.sqlite && .build/release/fanout snapshot schema"
          + " | cat - datasets/sample/snapshot.sql | sqlite3 datasets/sample/snapshot.sqlite",
      ])
    #expect(sample.status == 0, "\(sample.stderr)")
    return dir
  }

  @Test("every shell block of every page succeeds, in order", arguments: pages)
  func page(_ page: String) throws {
    let blocks = Self.blocks(of: page)
    guard !blocks.isEmpty else { return }
    let dir = try Self.scratch()
    for block in blocks {
      if let reason = block.skip {
        print("docs test: \(block) not run: \(reason)")
        continue
      }
      // Bounded: a block that hangs fails the test instead of the suite.
      let run = runProcess(
        "/usr/bin/timeout",
        ["-k", "10", "300", "/bin/bash", "-e", "-c", "cd '\(dir)'\n" + block.code],
        environment: [
          "PATH": dir + "/.build/release:" + (ProcessInfo.processInfo.environment["PATH"] ?? "")
        ])
      #expect(run.status == 0, "\(block) failed (\(run.status)):\n\(block.code)\n\(run.stderr)")
    }
  }

  @Test("the skip markers are few, and each names its reason")
  func skips() {
    let all = Self.pages.flatMap(Self.blocks(of:))
    let skipped = all.filter { $0.skip != nil }
    #expect(all.count > 20)
    #expect(skipped.count <= 8, "\(skipped)")
    #expect(skipped.allSatisfy { $0.skip!.count > 10 })
  }
}
