import ArgumentParser
import FanoutSnapshot

/// The compiled index cache, for every command that loads a snapshot.
struct IndexCacheOptions: ParsableArguments {
  @Option(
    help: ArgumentHelp(
      "Folder of compiled snapshots, read and filled automatically "
        + "(default: $XDG_CACHE_HOME/fanout, else ~/.cache/fanout; at most 4 GiB).",
      valueName: "dir"))
  var indexCache: String?

  @Flag(help: "Load the snapshot from SQLite; neither read nor fill the index cache.")
  var noIndexCache = false

  func validate() throws {
    if noIndexCache && indexCache != nil {
      throw ValidationError("give --index-cache DIR or --no-index-cache, not both")
    }
  }

  /// The cache in use, or nil with `--no-index-cache` or no folder to use.
  var cache: IndexCache? {
    guard !noIndexCache, let directory = indexCache ?? IndexCache.defaultDirectory() else {
      return nil
    }
    return IndexCache(directory: directory)
  }
}
