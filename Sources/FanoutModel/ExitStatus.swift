/// The process exit codes every command uses (sysexits.h), named once. Each
/// module's error type says which of these it is; the command line exits
/// with its raw value.
public enum ExitStatus: Int32, Sendable {
  case success = 0
  /// A bad command line, output folder or `--sql`: nothing was done.
  case usage = 64
  /// Input data refused: a snapshot, a change, B not comparable with A.
  case dataError = 65
  /// The messages, changes or socket could not be read or set up.
  case noInput = 66
  /// An output file could not be written; nothing is left under a final name.
  case cannotCreate = 73
  /// A bug in Fanout caught by its own checks (EX_SOFTWARE).
  case internalError = 70
  /// The system refused memory a run needed (EX_OSERR): a ledger (rule
  /// 8's throttle, contract v3's notifications) outgrew what it gave;
  /// nothing is left under a final name.
  case outOfMemory = 71
  /// Temporary: the snapshot was busy (locked by a writer); try again.
  case tryAgain = 75
}
