import Dispatch
import Synchronization

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// SIGINT, SIGTERM and SIGHUP, handled from the first instant of `main`.
///
/// `blockAtStart()` blocks them before any thread exists, so every thread
/// inherits the mask and none can die of a signal's default action; Dispatch
/// signal sources then take them (on Linux through a `signalfd`, which reads
/// blocked signals). Until a command says otherwise, a signal ends the run
/// the way a terminal user expects: the run's partial files and lock are
/// removed (`CleanupOnSignal`) and the process exits 128 + the signal's
/// number (130 for SIGINT, 143 for SIGTERM, 129 for SIGHUP). The stage
/// handles them itself (`handle(_:)`): stop, or reload the snapshot.
public enum TerminationSignals {
  public static let numbers: [Int32] = [SIGINT, SIGTERM, SIGHUP]

  /// Where signals go: held until the command says (`endRunOnSignal()` or
  /// `handle(_:)`), so that none is acted on by the wrong policy.
  private enum Policy {
    case undecided(pending: [Int32])
    case endRun
    case handler(@Sendable (Int32) -> Void)
  }
  private static let policy = Mutex(Policy.undecided(pending: []))
  nonisolated(unsafe) private static var sources: [any DispatchSourceSignal] = []

  /// Blocks the signals and arms their sources; the first thing `main` does.
  public static func blockAtStart() {
    var mask = sigset_t()
    sigemptyset(&mask)
    for number in numbers { sigaddset(&mask, number) }
    pthread_sigmask(SIG_BLOCK, &mask, nil)
    sources = numbers.map { number in
      let source = DispatchSource.makeSignalSource(signal: number, queue: .global())
      source.setEventHandler { deliver(number) }
      source.resume()
      return source
    }
  }

  /// A signal ends the run, its partial files and lock removed (every
  /// command but the stage).
  public static func endRunOnSignal() { decide(.endRun) }

  /// Signals go to `action` (the stage: stop or reload); any that arrived
  /// since `blockAtStart()` is delivered now.
  public static func handle(_ action: @escaping @Sendable (Int32) -> Void) {
    decide(.handler(action))
  }

  /// The name of signal `number`, as logs and messages print it.
  public static func name(_ number: Int32) -> String {
    switch number {
    case SIGINT: "SIGINT"
    case SIGTERM: "SIGTERM"
    case SIGHUP: "SIGHUP"
    default: "signal \(number)"
    }
  }

  private static func decide(_ decided: Policy) {
    let pending = policy.withLock { policy -> [Int32] in
      defer { policy = decided }
      if case .undecided(let pending) = policy { return pending }
      return []
    }
    for number in pending { act(on: number, decided) }
  }

  private static func deliver(_ number: Int32) {
    let current = policy.withLock { policy -> Policy? in
      if case .undecided(let pending) = policy {
        policy = .undecided(pending: pending + [number])
        return nil
      }
      return policy
    }
    if let current { act(on: number, current) }
  }

  private static func act(on number: Int32, _ policy: Policy) {
    switch policy {
    case .handler(let action): action(number)
    case .endRun: CleanupOnSignal.runAndExit(signal: number)
    case .undecided: break
    }
  }
}

/// What a run must undo if a signal ends it: its partial files, its lock
/// file, an output folder it created. Each is registered while it exists
/// and withdrawn once the run has made it final (or removed it itself).
///
/// `commit` holds the same lock as the cleanup, so a signal never lands
/// between the renames that publish a run's files together: it waits for
/// them, and the run is then complete.
public enum CleanupOnSignal {
  private struct State {
    var next = 0
    var actions: [(key: Int, action: @Sendable () -> Void)] = []
  }
  private static let state = Mutex(State())

  /// Registers `action`; returns the key that withdraws it.
  public static func register(_ action: @escaping @Sendable () -> Void) -> Int {
    state.withLock { state in
      state.next += 1
      state.actions.append((state.next, action))
      return state.next
    }
  }

  /// The action is no longer needed.
  public static func withdraw(_ key: Int) {
    state.withLock { state in state.actions.removeAll { $0.key == key } }
  }

  /// Held while a run publishes its files, and by the cleanup: a signal
  /// waits for the renames rather than landing between them.
  private static let publishing = Mutex(())

  /// Runs `body` with no cleanup in between: renames that publish files,
  /// or making a file together with registering (or removing it together
  /// with withdrawing) the cleanup that undoes it.
  public static func commit<T, E: Error>(_ body: () throws(E) -> T) throws(E) -> T {
    // The lock is not held across the throw: a Mutex body may throw, but only its own type.
    let result: Result<T, E> = publishing.withLock { _ in
      do throws(E) { return .success(try body()) } catch { return .failure(error) }
    }
    return try result.get()
  }

  /// Makes something (a file, a folder) together with registering `undo`
  /// for it: a signal never finds it made and its cleanup not registered.
  /// Returns it and the key that withdraws the cleanup.
  public static func make<T: Sendable, E: Error>(
    _ create: () throws(E) -> T, undoneBy undo: @escaping @Sendable (T) -> Void
  ) throws(E) -> (made: T, cleanup: Int) {
    try commit { () throws(E) in
      let made = try create()
      return (made, register { undo(made) })
    }
  }

  /// Undoes everything registered, newest first, says so on standard
  /// error, and exits with 128 + `signal`.
  public static func runAndExit(signal number: Int32) -> Never {
    runAndExit(
      status: 128 + number, saying: "fanout: stopped by \(TerminationSignals.name(number))")
  }

  /// Undoes everything registered, newest first, writes `message` on
  /// standard error, and exits with `status`: a run that cannot go on
  /// (the system refused it memory) ends as a signal would end it, its
  /// partial files and lock removed.
  public static func runAndExit(status: Int32, saying message: String) -> Never {
    publishing.withLock { _ in
      let actions = state.withLock { state in
        defer { state.actions = [] }
        return state.actions
      }
      for entry in actions.reversed() { entry.action() }
      var line = Array((message + "\n").utf8)
      _ = line.withUnsafeMutableBytes { write(STDERR_FILENO, $0.baseAddress, $0.count) }
      _exit(status)
    }
  }
}
