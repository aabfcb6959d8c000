/// FanoutGenerator owns synthetic datasets: a deterministic snapshot and a
/// day of traffic shaped like a messaging app (`chat`) or like announcement
/// channels (`broadcast`), for benchmarks and tests at any scale. The same
/// options always give the same bytes.
#if canImport(Glibc)
  import Glibc
#endif

public enum Generator {
  /// 2026-03-08T00:00:00Z: the traffic's day, on which New York and the rest
  /// of North America switch to daylight saving time (07:00Z onwards).
  static let day: Int64 = 1_772_928_000_000
  static let dayMillis: Int64 = 86_400_000

  /// What is wrong with these counts, if anything. (Past 100M users or
  /// 1G messages the files would be hundreds of gigabytes, and the
  /// population's arrays could not be allocated: an error, not a crash.)
  public static func problem(users: Int, messages: Int) -> String? {
    if users < 2 { return "--users must be at least 2" }
    if users > 100_000_000 { return "--users must be at most 100000000" }
    if messages < 0 { return "--messages must not be negative" }
    if messages > 1_000_000_000 { return "--messages must be at most 1000000000" }
    return nil
  }

  /// Writes `snapshot.sqlite` and `traffic.ndjson` into `options.out`,
  /// calling `progress` now and then with the rows written so far (users,
  /// memberships, messages) and the fraction of the work done.
  public static func run(
    _ options: GeneratorOptions, progress: ((_ rows: Int, _ fraction: Double) -> Void)? = nil
  ) throws -> GeneratorReport {
    if let problem = problem(users: options.users, messages: options.messages) {
      throw GeneratorError(description: problem)
    }
    mkdir(options.out, 0o755)
    var random = Random(seed: options.seed)
    let population = Population(users: options.users, random: &random)
    var report = GeneratorReport()
    report.snapshotPath = options.snapshotPath ?? options.out + "/snapshot.sqlite"
    report.trafficPath = options.trafficPath ?? options.out + "/traffic.ndjson"
    var v2 = options.v2 || options.v3 ? V2Features(seed: options.seed) : nil
    var v3 = options.v3 ? V3Features(seed: options.seed) : nil
    // Rough shares of the time: users 30%, channels and members 40%, traffic 30%.
    let users = Double(population.users)
    let memberships = Double(population.channels.reduce(0) { $0 + $1.members.count })
    let messages = Double(max(1, options.messages))
    try SnapshotWriter.write(
      population, to: report.snapshotPath, random: &random, v2: &v2, v3: v3 != nil,
      report: &report,
      progress: { phase, done in
        progress?(
          done,
          phase == .users
            ? 0.3 * Double(done) / users : 0.3 + 0.4 * Double(done) / max(1, memberships))
      })
    try TrafficWriter.write(
      population, messages: options.messages, profile: options.profile, to: report.trafficPath,
      random: &random, v2: &v2, v3: &v3, report: &report,
      progress: { done in progress?(done, 0.7 + 0.3 * Double(done) / messages) })
    return report
  }
}
