// swift-tools-version:6.1
import PackageDescription

let package = Package(
  name: "Fanout",
  platforms: [.macOS(.v15)],  // Linux is the target; this only keeps Synchronization usable on a Mac
  products: [.executable(name: "fanout", targets: ["fanout"])],
  dependencies: [
    .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.0")
  ],
  targets: [
    .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
    .systemLibrary(name: "CLZ4", pkgConfig: "liblz4", providers: [.apt(["liblz4-dev"])]),

    .target(name: "FanoutModel"),
    .target(name: "FanoutTime"),
    .target(name: "FanoutIndex", dependencies: ["FanoutModel", "FanoutTime"]),
    .target(name: "FanoutSnapshot", dependencies: ["CSQLite", "FanoutIndex"]),
    .target(name: "FanoutTraffic", dependencies: ["FanoutModel", "FanoutIndex"]),
    .target(name: "FanoutKernel", dependencies: ["FanoutIndex", "FanoutTime", "FanoutTraffic"]),
    .target(name: "FanoutOutput", dependencies: ["CLZ4", "FanoutModel"]),
    .target(name: "FanoutGenerator", dependencies: ["FanoutSnapshot"]),
    .target(
      name: "FanoutPipeline",
      dependencies: ["FanoutSnapshot", "FanoutTraffic", "FanoutKernel", "FanoutOutput"]),
    .executableTarget(
      name: "fanout",
      dependencies: [
        "FanoutPipeline", "FanoutGenerator",
        .product(name: "ArgumentParser", package: "swift-argument-parser"),
      ]),

    .target(
      name: "FanoutTestSupport", dependencies: ["CSQLite", "CLZ4", "FanoutPipeline"],
      path: "Tests/FanoutTestSupport"),
    .testTarget(name: "FanoutTimeTests", dependencies: ["FanoutTime"]),
    .testTarget(name: "FanoutIndexTests", dependencies: ["FanoutIndex"]),
    .testTarget(name: "FanoutSnapshotTests", dependencies: ["FanoutSnapshot", "FanoutTestSupport"]),
    .testTarget(name: "FanoutTrafficTests", dependencies: ["FanoutTraffic", "FanoutTestSupport"]),
    .testTarget(name: "FanoutKernelTests", dependencies: ["FanoutKernel", "FanoutTestSupport"]),
    .testTarget(name: "FanoutOutputTests", dependencies: ["FanoutOutput", "FanoutTestSupport"]),
    .testTarget(name: "FanoutCLITests", dependencies: ["FanoutTestSupport"]),
  ]
)
