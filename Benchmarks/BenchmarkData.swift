// Shared by the suites (symlinked into each): one generated dataset, made once.
import FanoutGenerator
import Foundation

/// A `fanout gen` dataset in the temporary folder, generated on first use.
/// Size it with FANOUT_BENCH_USERS / FANOUT_BENCH_MESSAGES (default 100k / 200k).
enum BenchmarkData {
  static let users = Int(ProcessInfo.processInfo.environment["FANOUT_BENCH_USERS"] ?? "") ?? 100_000
  static let messages = Int(ProcessInfo.processInfo.environment["FANOUT_BENCH_MESSAGES"] ?? "") ?? 200_000
  static let directory = NSTemporaryDirectory() + "/fanout-bench-\(users)-\(messages)-seed1"
  static var snapshot: String { directory + "/snapshot.sqlite" }
  static var traffic: String { directory + "/traffic.ndjson" }

  static func ensure() {
    let done = directory + "/.complete"
    if FileManager.default.fileExists(atPath: done) { return }
    _ = try! Generator.run(
      GeneratorOptions(users: users, messages: messages, seed: 1, profile: .chat, out: directory))
    FileManager.default.createFile(atPath: done, contents: nil)
  }
}
