// Shared by the suites (symlinked into each): one generated dataset, made once.
import Benchmark
import FanoutGenerator
import Foundation

/// Tolerances for `make bench`'s threshold check: allocations are
/// repeatable and gate tightly; times on a shared 2-core machine are noisy
/// and only catch gross regressions. (Read-only after start-up.)
nonisolated(unsafe) let tolerances: [BenchmarkMetric: BenchmarkThresholds] = [
  .mallocCountTotal: .init(relative: [.p90: 5]),
  .peakMemoryResident: .init(relative: [.p90: 20]),
  .wallClock: .init(relative: [.p90: 50]),
  .cpuTotal: .init(relative: [.p90: 50]),
  .throughput: .init(relative: [.p90: 50]),
  .custom("pairs/s", polarity: .prefersLarger, useScalingFactor: false): .init(relative: [.p90: 50]
  ),
  .custom("MB/s per core", polarity: .prefersLarger, useScalingFactor: false): .init(
    relative: [.p90: 50]),
]

/// A `fanout gen` dataset in the temporary folder, generated on first use.
/// Size it with FANOUT_BENCH_USERS / FANOUT_BENCH_MESSAGES (default 100k / 200k)
/// and pick FANOUT_BENCH_PROFILE (chat, the default, or broadcast).
enum BenchmarkData {
  static let users = Int(ProcessInfo.processInfo.environment["FANOUT_BENCH_USERS"] ?? "") ?? 100_000
  static let messages =
    Int(ProcessInfo.processInfo.environment["FANOUT_BENCH_MESSAGES"] ?? "") ?? 200_000
  static let profile =
    Profile(rawValue: ProcessInfo.processInfo.environment["FANOUT_BENCH_PROFILE"] ?? "") ?? .chat
  static let directory =
    NSTemporaryDirectory() + "/fanout-bench-\(users)-\(messages)-seed1-v2"
    + (profile == .chat ? "" : "-\(profile)")
  static var snapshot: String { directory + "/snapshot.sqlite" }
  static var traffic: String { directory + "/traffic.ndjson" }

  static func ensure() {
    let done = directory + "/.complete"
    if FileManager.default.fileExists(atPath: done) { return }
    _ = try! Generator.run(
      GeneratorOptions(users: users, messages: messages, seed: 1, profile: profile, out: directory))
    _ = FileManager.default.createFile(atPath: done, contents: nil)
  }

  /// Contract v3's data (`gen --v3`: groups on, 10% read lines), and beside
  /// it the same snapshot with the groups off: the cost of section 6 is
  /// the difference between two runs on one traffic.
  static let v3Directory =
    NSTemporaryDirectory() + "/fanout-bench-\(users)-\(messages)-seed1-v3"
    + (profile == .chat ? "" : "-\(profile)")
  static var v3Snapshot: String { v3Directory + "/snapshot.sqlite" }
  static var v3SnapshotGroupsOff: String { v3Directory + "/snapshot-groups-off.sqlite" }
  static var v3Traffic: String { v3Directory + "/traffic.ndjson" }

  static func ensureV3() {
    let done = v3Directory + "/.complete"
    if FileManager.default.fileExists(atPath: done) { return }
    var options = GeneratorOptions(
      users: users, messages: messages, seed: 1, profile: profile, out: v3Directory)
    options.v3 = true
    _ = try! Generator.run(options)
    try? FileManager.default.removeItem(atPath: v3SnapshotGroupsOff)
    try! FileManager.default.copyItem(atPath: v3Snapshot, toPath: v3SnapshotGroupsOff)
    let sqlite = Process()
    sqlite.executableURL = URL(fileURLWithPath: "/usr/bin/sqlite3")
    sqlite.arguments = [
      v3SnapshotGroupsOff, "DELETE FROM settings WHERE key LIKE 'notification_group%'",
    ]
    try! sqlite.run()
    sqlite.waitUntilExit()
    _ = FileManager.default.createFile(atPath: done, contents: nil)
  }
}
