import ArgumentParser
import FanoutAudit
import FanoutModel
import FanoutPipeline

extension Fanout {
  struct AuditCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
      commandName: "audit",
      abstract: "Check a log of the pushes sent against what the preferences allow.",
      discussion: """
        Evaluates the traffic against the snapshot as eval does and compares each push of the \
        sent logs with the pair and device it answers: missed, spurious (with the rule's \
        reason), wrong_device, duplicate, early, late, unknown_message. A log is NDJSON (plain \
        or LZ4), a push per line ({"message","user","gateway","token" or "device","sent_at"}), \
        or Fanout's own <gateway>.ndjson.lz4 files. Writes findings.ndjson.lz4, audit.json, \
        report.html, rejected.ndjson and unreadable.ndjson to the output folder.

        Exit codes: 0 the audit ran (findings are data), 1 a finding of a --fail-on kind, \
        64 bad command line or output folder, 65 snapshot refused, 66 messages, snapshot or \
        log unreadable, 71 out of memory for a ledger (rule 8's throttle, contract v3's \
        notifications), 73 output could not be written, 75 snapshot busy.
        """)

    @Option(help: "The preferences snapshot (SQLite).")
    var snapshot: String

    @Option(help: "The traffic the pushes answer: NDJSON messages (a file: it is read twice).")
    var messages: String

    @Option(
      parsing: .upToNextOption,
      help: "The sent logs (one or more; NDJSON or LZ4; Fanout's gateway files too).")
    var sent: [String]

    @Option(help: "The output folder: created if needed, must be empty unless --overwrite.")
    var out: String

    @Option(
      parsing: .unconditional,
      help: "Milliseconds a push may leave before or after its delivery time.")
    var toleranceMs: Int64 = AuditOptions.defaultToleranceMs

    @Option(help: "Exit 1 when any finding of these kinds exists (comma-separated).")
    var failOn: String?

    @OptionGroup var runOptions: RunOptions
    @OptionGroup var indexCacheOptions: IndexCacheOptions

    func validate() throws {
      if sent.isEmpty { throw ValidationError("--sent: give at least one log") }
      if toleranceMs < 0 { throw ValidationError("--tolerance-ms must be at least 0") }
      _ = try failKinds()
    }

    private func failKinds() throws -> Set<FindingKind> {
      guard let failOn else { return [] }
      var kinds: Set<FindingKind> = []
      for name in failOn.split(separator: ",", omittingEmptySubsequences: false) {
        guard let kind = FindingKind(name: String(name)) else {
          throw ValidationError(
            "--fail-on: unknown kind '\(name)' (one of "
              + FindingKind.allCases.map(\.name).joined(separator: ", ") + ")")
        }
        kinds.insert(kind)
      }
      return kinds
    }

    func run() throws {
      var options = AuditOptions(snapshot: snapshot, messages: messages, sent: sent, out: out)
      options.toleranceMs = toleranceMs
      options.threads = runOptions.workerThreads
      options.overwrite = runOptions.overwrite
      options.busyTimeoutMilliseconds = runOptions.busyTimeout
      options.indexCache = indexCacheOptions.cache
      options.failOn = try failKinds()
      let report: AuditReport
      do { report = try Audit.run(options) } catch {
        throw fail(error, status: error.exitStatus)
      }
      var stderr = StandardError()
      if report.rejected > 0 {
        print(
          "fanout: \(report.rejected) traffic lines rejected; see \(out)/rejected.ndjson",
          to: &stderr)
      }
      if report.unreadable > 0 {
        print(
          "fanout: \(report.unreadable) sent log lines unreadable; see \(out)/unreadable.ndjson",
          to: &stderr)
      }
      if let at = report.sortedAt {
        print(
          "fanout: the sent log is not in traffic order (from \(at)): it was read whole and "
            + "sorted (memory grows with the log)", to: &stderr)
      }
      let t = report.tally
      if t.sent > 0 && t.count(.unknownMessage) * 2 > t.sent {
        print(
          "fanout: warning: \(t.count(.unknownMessage)) of \(t.sent) pushes name messages that "
            + "are not in \(messages): is the log from another traffic file?", to: &stderr)
      }
      print(Printable.text(report.text), terminator: "")
      if options.failOn.contains(where: { t.count($0) > 0 }) { throw ExitCode(1) }
    }
  }
}
