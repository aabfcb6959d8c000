import FanoutTestSupport
import Foundation
import Testing

/// Runs `fanout` under a pseudo-terminal `columns` wide (util-linux's
/// `script`), and returns every progress line it drew: the text between a
/// carriage return and the erase-to-end-of-line that closes each draw.
private func progressLines(_ arguments: [String], columns: Int) -> (status: Int32, lines: [String])
{
  let command =
    "stty cols \(columns); exec '\(fanoutExecutable)' "
    + arguments.map { "'\($0)'" }.joined(separator: " ")
  let run = runProcess("/usr/bin/script", ["-q", "-e", "-c", command, "/dev/null"])
  let text = String(decoding: run.stdout, as: UTF8.self)
  let draw = try! Regex(#"\r([^\r\n\u{1B}]*)\u{1B}\[K"#)
  let lines = text.matches(of: draw).map { String($0.output[1].substring ?? "") }
  return (run.status, lines)
}

@Suite("one progress line that fits the terminal")
struct ProgressLineTests {
  /// A day big enough for the line to show (after a second) in a debug build.
  static let day: String = {
    let dir = makeTemporaryDirectory("fanout-progress")
    let gen = runProcess(
      fanoutExecutable,
      ["gen", "--users", "60000", "--messages", "150000", "--seed", "2", "--out", dir])
    if gen.status != 0 { Issue.record("gen: \(gen.stderr)") }
    return dir
  }()

  @Test("gen at 80 and 40 columns: never wider, each step named", arguments: [80, 40])
  func gen(columns: Int) {
    let out = makeTemporaryDirectory() + "/out"
    let (status, lines) = progressLines(
      ["gen", "--users", "80000", "--messages", "80000", "--out", out], columns: columns)
    #expect(status == 0)
    #expect(lines.count > 3, "no progress drawn")
    #expect(
      lines.allSatisfy { $0.unicodeScalars.count < columns }, "\(lines.map(\.count).max() ?? 0)")
    for step in ["users", "channels", "traffic"] {
      #expect(lines.contains { $0.hasPrefix(step) }, "no \(step) step")
    }
    // Every drawn count line names its step (none falls back to a bare count).
    #expect(lines.filter { $0.contains("%") }.allSatisfy { !$0.first!.isNumber })
  }

  @Test("eval names load, evaluate and write, and reaches 100%", arguments: [80, 40])
  func eval(columns: Int) {
    let out = makeTemporaryDirectory() + "/out"
    let (status, lines) = progressLines(
      [
        "eval", "--snapshot", Self.day + "/snapshot.sqlite", "--messages",
        Self.day + "/traffic.ndjson",
        "--out", out, "--no-index-cache", "--threads", "1",
      ], columns: columns)
    #expect(status == 0)
    #expect(lines.allSatisfy { $0.unicodeScalars.count < columns })
    for step in ["load…", "evaluate…", "write…"] {
      #expect(lines.contains(step), "\(step) not shown: \(lines.prefix(5))")
    }
    #expect(
      lines.contains { $0.hasPrefix("evaluate [####################] 100%") }, "\(lines.suffix(4))")
  }
}
