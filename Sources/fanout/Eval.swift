import ArgumentParser
import FanoutModel
import FanoutPipeline

extension Fanout {
  struct Eval: ParsableCommand {
    static let configuration = CommandConfiguration(
      abstract: "Evaluate traffic against a snapshot and write delivery lists per gateway.",
      discussion: """
        Exit codes: 0 success (rejected traffic lines do not change it), 64 bad command line or \
        output folder (in use by another run, not empty without --overwrite), 65 snapshot \
        refused, 66 messages or snapshot file unreadable, 71 out of memory for a ledger (rule \
        8's throttle, contract v3's notifications; partial files and lock removed), 73 output \
        could not be written (nothing is left under a final name), 75 snapshot busy (locked by \
        a writer past --busy-timeout: try again), 130/143/129 stopped by SIGINT/SIGTERM/SIGHUP \
        (partial files and lock removed).
        """)

    @Option(help: "The preferences snapshot (SQLite).")
    var snapshot: String

    @Option(help: "The traffic: NDJSON messages, or - for standard input.")
    var messages: String

    @Option(help: "The output folder: created if needed, must be empty unless --overwrite.")
    var out: String

    @Flag(help: "Also write decisions.ndjson.lz4, one line per (message, recipient) pair.")
    var decisions = false

    @Flag(
      help: """
        Count only: write summary.json and rejected.ndjson, no delivery lists. \
        Alike messages in large channels then share one evaluation.
        """)
    var summaryOnly = false

    @Flag(
      help: """
        For `fanout merge`, on a shard snapshot (from `fanout snapshot split`): every output \
        line starts with its traffic line number, and summary.json names the shard and the \
        traffic.
        """)
    var mergeable = false

    @Option(
      help: """
        Exit 65, writing nothing, when more traffic lines than this are rejected: a number \
        (0: none may be) or a share of the lines read (0.5%). Default: any number.
        """)
    var maxRejected: String?

    @OptionGroup var runOptions: RunOptions
    @OptionGroup var indexCacheOptions: IndexCacheOptions

    func validate() throws {
      if let maxRejected, RejectionLimit(maxRejected) == nil {
        throw ValidationError("--max-rejected must be a whole number or a percentage (0.5%)")
      }
      if summaryOnly && decisions {
        throw ValidationError("--summary-only writes no decisions: drop one of the two.")
      }
    }

    func run() throws {
      var options = EvalOptions(
        snapshot: snapshot, messages: messages, out: out, decisions: decisions,
        summaryOnly: summaryOnly,
        threads: runOptions.workerThreads, overwrite: runOptions.overwrite)
      options.busyTimeoutMilliseconds = runOptions.busyTimeout
      options.indexCache = indexCacheOptions.cache
      options.mergeable = mergeable
      options.maxRejected = maxRejected.flatMap(RejectionLimit.init)
      let progress = ProgressBar.ifTerminal()
      options.progress = progress?.update
      options.phase = progress?.show(step:)
      do {
        let report = try Pipeline.eval(options)
        progress?.clear()
        reportRejections(
          report.rejected, first: report.firstRejection, linesRead: report.linesRead,
          messages: report.counters.messages, folder: out)
        let c = report.counters
        print(
          "\(counted(c.messages, "message")), \(report.rejected) rejected, \(counted(c.pairs, "pair")), "
            + "\(c.delivered) delivered, \(counted(c.deliveries.reduce(0, +), "delivery", "deliveries")) "
            + "in \(threeDecimals(report.seconds)) s "
            + "(\(Int(report.pairsPerSecond)) pairs/s); output in \(out)")
      } catch {
        progress?.clear()
        throw fail(error)
      }
    }
  }
}
