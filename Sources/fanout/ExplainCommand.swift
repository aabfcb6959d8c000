import ArgumentParser
import FanoutExplain

#if canImport(Glibc)
  import Glibc
#endif

extension Fanout {
  struct ExplainCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
      commandName: "explain",
      abstract: "Explain the decision for one (message, user) pair, step by step.",
      discussion: """
        Give the message as a traffic line (--message '{"id":…}') or by id in a traffic file \
        (--messages FILE --id M: the first line with that id). Exit codes: 0 explained (whatever \
        the decision), 64 bad command line or unknown user, 65 snapshot refused or message \
        rejected, 66 messages unreadable or no such id, 70 internal error (the narration and \
        the kernel's verdict disagree: please report it), 75 snapshot busy. The verdict is the \
        kernel's own, from evaluating that one message as fanout eval does.
        """)

    @Option(help: "The preferences snapshot (SQLite).")
    var snapshot: String

    @Option(help: "The recipient's user id.")
    var user: String

    @Option(help: "The message, as one traffic line (JSON).")
    var message: String?

    @Option(help: "A traffic file (NDJSON) to take the message from; needs --id.")
    var messages: String?

    @Option(help: "The message id to explain from --messages.")
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
        let explainer = try Explainer(snapshot: snapshot, cache: indexCacheOptions.cache)
        let explanation =
          if let message {
            try explainer.explain(line: message, user: user)
          } else {
            try explainer.explain(messagesAt: messages!, id: id!, user: user)
          }
        print(
          json ? explanation.json().rendered() : explanation.text(), terminator: json ? "\n" : "")
      } catch {
        throw fail(error, status: error.exitStatus)
      }
    }
  }
}
