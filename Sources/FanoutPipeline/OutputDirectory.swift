#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// The rules for the output folder: created if needed; an existing one must
/// be empty unless overwriting, which removes only what a run writes there.
package enum OutputDirectory {
  /// Whether `name` is a file a run writes (or a partial one it left).
  static func isRunOutput(_ name: String) -> Bool {
    name.hasSuffix(".ndjson.lz4") || name == "rejected.ndjson" || name == "summary.json"
      || name == "report.json" || name == "report.html"
      || (name.hasPrefix(".") && name.hasSuffix(".partial"))
  }

  package static func entries(_ path: String) -> [String]? {
    guard let dir = opendir(path) else { return nil }
    defer { closedir(dir) }
    var names: [String] = []
    while let entry = readdir(dir) {
      let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
        String(cString: raw.baseAddress!.assumingMemoryBound(to: CChar.self))
      }
      if name != "." && name != ".." { names.append(name) }
    }
    return names.sorted()
  }

  /// Checks the folder before anything is loaded; with `overwrite`, removes
  /// the previous run's files.
  package static func prepare(_ path: String, overwrite: Bool) throws(PipelineError) {
    var st = stat()
    guard stat(path, &st) == 0 else {
      if errno == ENOENT { return }  // created once the snapshot is loaded
      throw .usage("output folder '\(path)': \(String(cString: strerror(errno)))")
    }
    guard (st.st_mode & S_IFMT) == S_IFDIR else {
      throw .usage("output path '\(path)' is not a folder")
    }
    guard let names = entries(path) else {
      throw .usage("output folder '\(path)' cannot be read: \(String(cString: strerror(errno)))")
    }
    if !overwrite {
      guard names.isEmpty else {
        throw .usage(
          "output folder '\(path)' is not empty (use --overwrite to replace a previous run's files)"
        )
      }
      return
    }
    for name in names where isRunOutput(name) {
      guard unlink(path + "/" + name) == 0 else {
        throw .usage("cannot remove '\(path)/\(name)': \(String(cString: strerror(errno)))")
      }
    }
  }

  /// Creates the folder and its missing parents.
  package static func create(_ path: String) throws(PipelineError) {
    var prefix = path.hasPrefix("/") ? "/" : ""
    for part in path.split(separator: "/") {
      prefix += part + "/"
      if mkdir(prefix, 0o755) != 0 && errno != EEXIST {
        throw .usage("cannot create output folder '\(path)': \(String(cString: strerror(errno)))")
      }
    }
  }
}
