import Foundation
import Testing

/// Where the package is, found from this file, so tests read `datasets/`
/// in place (as swift-syntax's tests find their package directory).
public let packageRoot: URL = URL(fileURLWithPath: #filePath)
  .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

public func datasetURL(_ relative: String) -> URL {
  packageRoot.appendingPathComponent("datasets/" + relative)
}

/// A fresh folder under the system's temporary folder.
public func makeTemporaryDirectory(_ label: String = "fanout-test") -> String {
  let path = NSTemporaryDirectory() + "/\(label)-\(UUID().uuidString)"
  do {
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
  } catch {
    Issue.record("cannot make a temporary folder: \(error)")
  }
  return path
}

/// The index cache of every `fanout` the tests start (as `XDG_CACHE_HOME`),
/// so that a test run never fills the user's own.
public let testCacheHome = makeTemporaryDirectory("fanout-cache-home")

/// `environment` over the test process's, with `testCacheHome` unless it says otherwise.
public func childEnvironment(_ environment: [String: String]) -> [String: String] {
  ProcessInfo.processInfo.environment.merging(["XDG_CACHE_HOME": testCacheHome]) { $1 }
    .merging(environment) { $1 }
}

public func readText(_ path: String) -> String {
  (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
}

public func listDirectory(_ path: String) -> [String] {
  ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).sorted()
}
