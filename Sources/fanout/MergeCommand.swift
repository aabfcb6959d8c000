import ArgumentParser
import FanoutModel
import FanoutPipeline
import FanoutScaleOut

extension Fanout {
  struct MergeCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
      commandName: "merge",
      abstract: "Merge the shards' `eval --mergeable` outputs into one run's files.",
      discussion: """
        Writes exactly the files `fanout eval` writes on the whole snapshot (summary.json sums \
        the shards; its times are the slowest shard's, each shard's under "timings"). Every \
        shard 0..N-1 of one split must be given once, each run on the same traffic with the \
        same options. Exit codes: 0 merged, 64 bad command line or output folder, 65 a shard \
        is missing, incomplete or from another split or traffic (nothing is written), 73 \
        output could not be written.
        """)

    @Option(help: "The output folder: created if needed, must be empty unless --overwrite.")
    var out: String

    @Flag(
      help: "Remove a previous run's files from the output folder first (never one this run reads)."
    )
    var overwrite = false

    @Argument(help: "The shards' output folders, in any order.")
    var shardOutputs: [String]

    func run() throws {
      let progress = ProgressBar.ifTerminal(unit: "MB")
      do {
        let report = try ShardMerge.run(
          shardOutputs: shardOutputs, out: out, overwrite: overwrite,
          step: progress?.show(step:), progress: progress?.update)
        progress?.clear()
        print(
          "\(report.shards) shards merged: \(report.messages) messages, \(report.pairs) pairs, "
            + "\(report.delivered) delivered in \(threeDecimals(report.seconds)) s; output in \(out)"
        )
      } catch {
        progress?.clear()
        throw fail(error)
      }
    }
  }
}
