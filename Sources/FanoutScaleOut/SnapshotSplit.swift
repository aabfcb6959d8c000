/// FanoutScaleOut owns running one evaluation as several: `fanout snapshot
/// split` writes a snapshot's recipient shards (`ShardSplitter`, one pass
/// over the source), each is evaluated by `eval --mergeable` anywhere, and
/// `fanout merge` (`ShardMerge`) merges their outputs into the bytes one
/// `eval` on the whole snapshot writes. The shard function itself
/// (`Shards`, Spark's `pmod(xxhash64(user_id), N)`) and the `fanout_shard`
/// label live in FanoutModel: the snapshot loader and `eval` read them too.
import FanoutModel
import FanoutOutput
import FanoutPipeline
import FanoutSnapshot

/// `fanout snapshot split`: a snapshot's recipient shards (docs/scale-out.md).
public enum SnapshotSplit {
  /// The file name of shard `k` of `count`.
  public static func fileName(shard k: Int, of count: Int) -> String {
    "shard-\(k)-of-\(count).sqlite"
  }

  /// Writes `count` shards of `snapshot` into `out` (created if needed,
  /// which must be empty): written aside, each validated as any snapshot,
  /// then all renamed together. A refusal leaves nothing behind.
  /// With `overwrite`, a previous split's shards (and partial files a
  /// killed one left) are removed first.
  /// `progress` is told the rows copied and their fraction, `step` each
  /// step after the copy.
  public static func run(
    snapshot: String, shards count: Int, out: String, overwrite: Bool = false,
    busyTimeoutMilliseconds: Int = SnapshotLoader.defaultBusyTimeoutMilliseconds,
    progress: ((_ rows: Int, _ fraction: Double?) -> Void)? = nil,
    step: ((String) -> Void)? = nil
  ) throws(PipelineError) -> [String] {
    guard count >= 1 else { throw .usage("--shards must be at least 1 (got \(count))") }
    let folder = try OutputFolder(
      claiming: out,
      mode: .fresh(overwrite: overwrite) { name in
        func isShard(_ name: String) -> Bool {
          name.hasPrefix("shard-") && name.hasSuffix(".sqlite")
        }
        return OutputFolder.isRunOutput(name) || isShard(name)
          || OutputFolder.isPartial(name, of: isShard)
      }, inputs: [.init("the snapshot", snapshot)])
    defer { folder.release() }
    let files: [PendingFile]
    do {
      files = try (0..<count).map { k throws(OutputError) in
        try PendingFile(directory: out, name: fileName(shard: k, of: count))
      }
    } catch { throw .output(error) }
    do {
      try ShardSplitter.split(
        source: snapshot, into: files.map(\.partialPath),
        busyTimeoutMilliseconds: busyTimeoutMilliseconds,
        progress: progress.map { p in { p($0, $1) } })
    } catch {
      switch error {
      case .source(let refusal): throw .snapshot(refusal)
      case .write(let failure):
        throw .output(OutputError(path: out, reason: "cannot write the shards: \(failure.message)"))
      }
    }
    do {
      for (k, file) in files.enumerated() {
        step?("checking shard \(k + 1) of \(count)")
        _ = try SnapshotLoader.load(path: file.partialPath)
      }
    } catch {
      throw .snapshot(error)
    }
    do { try PendingFile.commit(together: files) } catch { throw .output(error) }
    return files.map(\.path)
  }
}
