import ArgumentParser
import FanoutExplain
import FanoutModel

#if canImport(Glibc)
  import Glibc
#endif

extension Fanout {
  struct ExplainCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
      commandName: "explain",
      abstract:
        "Explain the decision for one (message, user) pair, step by step; without --user, the message's blast radius.",
      discussion: """
        Give the message as a traffic line (--message '{"id":…}') or by id in a traffic file \
        (--messages FILE --id M: the first line with that id). Without --user (and with \
        --message), the whole channel: pairs delivered, deferred by hour, suppressed by reason, \
        deliveries per gateway, badges — the counts of fanout eval on that one line; --users \
        lists the pairs. Exit codes: 0 explained (whatever the decision), 64 bad command line \
        or unknown user, 65 snapshot refused or message rejected, 66 messages unreadable or no \
        such id, 70 internal error (please report it), 71 out of memory for a ledger (rule \
        8's throttle, contract v3's notifications), 75 snapshot busy. The verdict is the \
        kernel's own: it inspects the pair with the rule chain fanout eval runs.
        """)

    @Option(help: "The preferences snapshot (SQLite).")
    var snapshot: String

    @Option(
      parsing: .unconditional,
      help: "The recipient's user id (without it: the message's blast radius).")
    var user: String?

    @Flag(help: "With the blast radius (no --user): list every pair too.")
    var users = false

    @Option(parsing: .unconditional, help: "The message, as one traffic line (JSON).")
    var message: String?

    @Option(help: "A traffic file (NDJSON) to take the message from; needs --id.")
    var messages: String?

    @Option(parsing: .unconditional, help: "The message id to explain from --messages.")
    var id: String?

    @Flag(help: "Write JSON instead of text.")
    var json = false

    @OptionGroup var indexCacheOptions: IndexCacheOptions

    func validate() throws {
      switch (message, messages, id) {
      case (_?, nil, nil), (nil, _?, _?): break
      case (_?, _?, _), (_?, _, _?):
        throw ValidationError("give either --message or --messages with --id")
      case (nil, _?, nil): throw ValidationError("--messages needs --id")
      case (nil, nil, _): throw ValidationError("give --message JSON, or --messages FILE --id M")
      }
      if user == nil && message == nil {
        throw ValidationError(
          "without --user, give the message as --message JSON: its blast radius is that of one line"
        )
      }
      if users && user != nil {
        throw ValidationError("--users lists the blast radius's pairs: leave out --user")
      }
      // A file where a line belongs: the near-miss of --messages.
      if let message, !message.drop(while: \.isWhitespace).hasPrefix("{"),
        access(message, R_OK) == 0
      {
        throw ValidationError(
          "--message takes one traffic line (JSON); '\(message)' is a file: did you mean "
            + "--messages '\(message)' --id M?")
      }
    }

    func run() throws {
      do {
        let explainer = try Explainer(
          snapshot: snapshot, cache: indexCacheOptions.cache, user: user)
        guard let user else {
          let radius = try explainer.blastRadius(line: message!)
          print(
            json ? radius.json(users: users).rendered() : Printable.text(radius.text(users: users)),
            terminator: json ? "\n" : "")
          return
        }
        let explanation =
          if let message {
            try explainer.explain(line: message, user: user)
          } else {
            try explainer.explain(messagesAt: messages!, id: id!, user: user)
          }
        print(
          json ? explanation.json().rendered() : Printable.text(explanation.text()),
          terminator: json ? "\n" : "")
      } catch {
        throw fail(error, status: error.exitStatus)
      }
    }
  }
}
