#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// Why a what-if scenario's snapshot could not be made.
public enum ScenarioError: Error, CustomStringConvertible {
  /// The source could not be copied (or a temporary folder made).
  case copy(String)
  /// The scenario's SQL failed on the copy.
  case sql(SQLiteError)

  public var description: String {
    switch self {
    case .copy(let reason): "cannot copy the snapshot for --sql: \(reason)"
    case .sql(let error): "--sql failed: \(error.message)"
    }
  }
}

/// Copies the snapshot at `source` into a new file at `path` with
/// `VACUUM INTO`: a consistent copy, the source opened read-only.
package func copySnapshot(from source: String, to path: String) throws(SQLiteError) {
  let original = try Connection(path: source)
  let vacuum = try original.prepare("VACUUM INTO ?")
  vacuum.bind(1, path)
  try vacuum.insert()
}

/// A private copy of a snapshot with a what-if scenario's SQL applied, in a
/// temporary folder that is removed with the value. The source is opened
/// read-only and copied with `VACUUM INTO`, so it is never modified.
public final class ScenarioCopy: Sendable {
  public let path: String
  private let folder: String

  public init(of source: String, applying sql: String) throws(ScenarioError) {
    let base = getenv("TMPDIR").map { String(cString: $0) } ?? "/tmp"
    var template = Array((base + "/fanout-whatif-XXXXXX").utf8CString)
    guard let made = mkdtemp(&template) else {
      throw .copy("mkdtemp in '\(base)': \(String(cString: strerror(errno)))")
    }
    folder = String(cString: made)
    path = folder + "/scenario.sqlite"
    do {
      try copySnapshot(from: source, to: path)
    } catch {
      removeFiles()
      throw .copy(error.message)
    }
    do {
      let copy = try Connection(path: path, writable: true)
      // The copy is thrown away after the run: no journal, no fsync.
      try copy.execute("PRAGMA journal_mode = OFF; PRAGMA synchronous = OFF")
      try copy.execute(sql)
    } catch {
      removeFiles()
      throw .sql(error)
    }
  }

  deinit { removeFiles() }

  private func removeFiles() {
    unlink(path)
    rmdir(folder)
  }
}
