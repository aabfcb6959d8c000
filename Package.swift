// swift-tools-version:6.1
import PackageDescription

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

let package = Package(
  name: "Fanout",
  // Linux is the target; this only keeps Synchronization usable on a Mac.
  platforms: [.macOS(.v15)],
  products: [.executable(name: "fanout", targets: ["fanout"])],
  dependencies: [
    .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.0"),
    .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.0"),
  ],
  targets: [
    .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
    .systemLibrary(name: "CLZ4", pkgConfig: "liblz4", providers: [.apt(["liblz4-dev"])]),
    .systemLibrary(name: "CRedis", pkgConfig: "hiredis", providers: [.apt(["libhiredis-dev"])]),

    // One static inline function: a cache prefetch, for the kernel and lookups.
    .target(name: "CPrefetch"),
    .target(name: "CChecksum"),

    .target(name: "FanoutModel"),
    .target(name: "FanoutTime"),
    .target(
      name: "FanoutIndex", dependencies: ["CChecksum", "CPrefetch", "FanoutModel", "FanoutTime"],
      // Structural checks of every index built (Index+Invariants.swift): on
      // in debug builds, so the test suite always runs with them.
      swiftSettings: [.define("FANOUT_INTERNAL_CHECKS", .when(configuration: .debug))]),
    .target(name: "FanoutSQLite", dependencies: ["CSQLite", "FanoutModel"]),
    .target(
      name: "FanoutSnapshot",
      dependencies: [
        "CPrefetch", "CSQLite", "FanoutIndex", "FanoutModel", "FanoutSQLite", "FanoutTime",
      ]),
    .target(
      name: "FanoutKernel",
      dependencies: ["CPrefetch", "FanoutIndex", "FanoutModel", "FanoutTime"],
      // The evaluator's and ledgers' per-pair state lives in final classes,
      // whose every field access a release build checks for exclusivity at
      // run time (3-4% of a run's CPU). Debug builds, and so the test
      // suite, keep the checks.
      swiftSettings: [
        .unsafeFlags(["-enforce-exclusivity=unchecked"], .when(configuration: .release))
      ]),
    .target(
      name: "FanoutTraffic",
      dependencies: ["FanoutIndex", "FanoutKernel", "FanoutModel", "FanoutTime"]),
    .target(name: "FanoutOutput", dependencies: ["CLZ4", "FanoutModel"]),
    .target(
      name: "FanoutGenerator", dependencies: ["FanoutSQLite", "FanoutSnapshot", "FanoutTime"]),
    .target(
      name: "FanoutEngine",
      dependencies: ["FanoutIndex", "FanoutKernel", "FanoutModel", "FanoutTime", "FanoutTraffic"]),
    .target(
      name: "FanoutPipeline",
      dependencies: [
        "FanoutEngine", "FanoutIndex", "FanoutKernel", "FanoutModel", "FanoutOutput",
        "FanoutSnapshot", "FanoutTime", "FanoutTraffic",
      ]),
    .target(
      name: "FanoutScaleOut",
      dependencies: [
        "CSQLite", "FanoutKernel", "FanoutModel", "FanoutOutput", "FanoutPipeline",
        "FanoutSQLite", "FanoutSnapshot",
      ]),
    .target(name: "FanoutReport", dependencies: ["FanoutModel"]),
    .target(
      name: "FanoutWhatIf",
      dependencies: [
        "CPrefetch", "CSQLite",
        "FanoutEngine", "FanoutIndex", "FanoutKernel", "FanoutModel", "FanoutOutput",
        "FanoutPipeline", "FanoutReport", "FanoutSQLite",
        "FanoutSnapshot", "FanoutTime", "FanoutTraffic",
      ]),
    .target(
      name: "FanoutStream",
      dependencies: [
        "CRedis", "FanoutEngine", "FanoutIndex", "FanoutKernel", "FanoutModel", "FanoutOutput",
        "FanoutPipeline",
        "FanoutSnapshot", "FanoutTime", "FanoutTraffic",
        .product(name: "Prometheus", package: "swift-prometheus"),
      ]),
    .target(
      name: "FanoutExplain",
      dependencies: [
        "FanoutEngine", "FanoutIndex", "FanoutKernel", "FanoutModel", "FanoutSnapshot",
        "FanoutTime", "FanoutTraffic",
      ]),
    .target(
      name: "FanoutAudit",
      dependencies: [
        "FanoutEngine", "FanoutIndex", "FanoutKernel", "FanoutModel", "FanoutOutput",
        "FanoutPipeline",
        "FanoutReport", "FanoutSnapshot", "FanoutTime", "FanoutTraffic",
      ]),
    .target(
      name: "FanoutMigration",
      dependencies: [
        "CSQLite",
        "FanoutIndex", "FanoutModel", "FanoutSQLite", "FanoutSnapshot", "FanoutTime",
        "FanoutTraffic",
      ]),
    .executableTarget(
      name: "fanout",
      dependencies: [
        "FanoutPipeline", "FanoutWhatIf", "FanoutStream", "FanoutExplain", "FanoutMigration",
        "FanoutAudit", "FanoutScaleOut",
        "FanoutGenerator", "FanoutKernel", "FanoutModel", "FanoutSnapshot", "FanoutTime",
        "FanoutTraffic",
        .product(name: "ArgumentParser", package: "swift-argument-parser"),
      ],
      // The Swift libraries linked in (FoundationEssentials with its two
      // shims; nothing imports the whole of Foundation): the dynamic loader
      // then has little to do, about 1 ms from exec to `main` instead of up
      // to 9, so the termination signals are blocked sooner
      // (TerminationSignals) and every command starts faster.
      linkerSettings: [
        .unsafeFlags(["-static-stdlib", "-l_FoundationCShims", "-l_FoundationCollections"])
      ]),

    .target(
      name: "FanoutTestSupport", dependencies: ["CSQLite", "CLZ4", "FanoutPipeline"],
      path: "Tests/FanoutTestSupport"),
    .testTarget(name: "FanoutTimeTests", dependencies: ["FanoutTime"]),
    .testTarget(name: "FanoutIndexTests", dependencies: ["FanoutIndex", "FanoutTestSupport"]),
    .testTarget(
      name: "FanoutSnapshotTests",
      dependencies: ["FanoutIndex", "FanoutSQLite", "FanoutSnapshot", "FanoutTestSupport"]),
    .testTarget(
      name: "FanoutTrafficTests",
      dependencies: ["FanoutKernel", "FanoutModel", "FanoutTraffic", "FanoutTestSupport"]),
    .testTarget(
      name: "FanoutKernelTests",
      dependencies: [
        "FanoutKernel", "FanoutGenerator", "FanoutModel", "FanoutPipeline", "FanoutSnapshot",
        "FanoutTestSupport",
      ]),
    .testTarget(
      name: "FanoutOutputTests", dependencies: ["FanoutModel", "FanoutOutput", "FanoutTestSupport"]),
    .testTarget(name: "FanoutCLITests", dependencies: ["FanoutTestSupport"]),
    .testTarget(
      name: "FanoutWhatIfTests",
      dependencies: [
        "FanoutWhatIf", "FanoutGenerator", "FanoutKernel", "FanoutSQLite", "FanoutSnapshot",
        "FanoutTestSupport",
      ]),
    .testTarget(
      name: "FanoutExplainTests",
      dependencies: [
        "FanoutExplain", "FanoutGenerator", "FanoutModel", "FanoutPipeline", "FanoutTestSupport",
      ]),
    .testTarget(
      name: "FanoutMigrationTests", dependencies: ["FanoutMigration", "FanoutTestSupport"]),
    .testTarget(
      name: "FanoutStreamTests",
      dependencies: ["FanoutGenerator", "FanoutStream", "FanoutTestSupport"]),
  ]
)

// Benchmarks (package-benchmark) only when asked: `make bench` sets
// FANOUT_BENCHMARKS=1 and uses its own build folder, so tests and CI never
// resolve or build the benchmark package.
if getenv("FANOUT_BENCHMARKS") != nil {
  package.dependencies.append(
    .package(
      url: "https://github.com/ordo-one/benchmark.git", from: "1.38.0", traits: ["MallocInterposer"]
    ))
  for (suite, modules) in [
    ("LoadBenchmarks", ["FanoutPipeline", "FanoutExplain"]),
    ("KernelBenchmarks", ["FanoutEngine", "FanoutPipeline"]),
    ("StreamBenchmarks", ["FanoutEngine", "FanoutPipeline", "FanoutStream"]),
    ("WhatIfBenchmarks", ["FanoutWhatIf", "FanoutPipeline"]),
  ] {
    package.targets.append(
      .executableTarget(
        name: suite,
        dependencies: modules.map { .target(name: $0) } + [
          "FanoutGenerator", .product(name: "Benchmark", package: "benchmark"),
        ],
        path: "Benchmarks/\(suite)",
        plugins: [.plugin(name: "BenchmarkPlugin", package: "benchmark")]))
  }
}
