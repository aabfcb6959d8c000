import Foundation

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
  try! FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
  return path
}

public func readText(_ path: String) -> String {
  (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
}

public func listDirectory(_ path: String) -> [String] {
  ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).sorted()
}
