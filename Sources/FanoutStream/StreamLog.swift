#if canImport(Glibc)
  import Glibc
#endif

/// Log lines on standard error, `fanout stream: …`, each in one write so
/// lines from different threads never interleave.
struct StreamLog: Sendable {
  func line(_ text: String) {
    var bytes = Array("fanout stream: \(text)\n".utf8)
    _ = bytes.withUnsafeMutableBytes { write(STDERR_FILENO, $0.baseAddress, $0.count) }
  }
}
