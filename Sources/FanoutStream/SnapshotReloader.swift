import Dispatch
import FanoutIndex
import FanoutModel
import FanoutPipeline
import FanoutSnapshot
import FanoutTime
import Synchronization

#if canImport(Glibc)
  import Glibc
#endif

/// Which file a snapshot was loaded from: replacing it (an atomic rename)
/// gives another inode, rewriting it another size or modification time.
struct SnapshotIdentity: Sendable, Equatable {
  var device: UInt64
  var inode: UInt64
  var size: Int64
  /// The modification time as the file system gives it, seconds and
  /// nanoseconds apart: any file's, even one dated past 2262 (beyond
  /// nanoseconds in 64 bits).
  var modifiedSeconds: Int64
  var modifiedNanoseconds: Int64

  init?(path: String) {
    var st = stat()
    guard stat(path, &st) == 0 else { return nil }
    device = UInt64(st.st_dev)
    inode = UInt64(st.st_ino)
    size = Int64(st.st_size)
    modifiedSeconds = Int64(st.st_mtim.tv_sec)
    modifiedNanoseconds = Int64(st.st_mtim.tv_nsec)
  }

  /// The modification time in Unix milliseconds, held at Int64's ends.
  var modifiedMillis: Int64 {
    let (millis, beyond) = modifiedSeconds.multipliedReportingOverflow(by: 1000)
    if beyond { return modifiedSeconds < 0 ? .min : .max }
    let (total, over) = millis.addingReportingOverflow(modifiedNanoseconds / 1_000_000)
    return over ? .max : total
  }
}

/// A loaded snapshot and what the output says about it.
struct LoadedSnapshot: Sendable {
  let index: Index
  /// 1 for the snapshot the stream started with, then one more per reload.
  let generation: Int
  let path: String
  let identity: SnapshotIdentity
  let loadedAtMillis: Int64
  let loadSeconds: Double

  /// `{"generation":2,"path":"…","inode":…,"size":…,"modified":"…","loaded_at":"…"}`
  var json: JSONValue {
    .object([
      ("generation", .int(Int64(generation))), ("path", .string(path)),
      ("device", .number(String(identity.device))), ("inode", .number(String(identity.inode))),
      ("size", .int(identity.size)),
      ("modified", .string(LocalTime.rfc3339UTC(millis: identity.modifiedMillis))),
      ("loaded_at", .string(LocalTime.rfc3339UTC(millis: loadedAtMillis))),
    ])
  }

  /// A log event's fields for this snapshot's load.
  var logFields: KeyValuePairs<String, LogValue> {
    ["snapshot": .json(json), "load_seconds": .decimal(loadSeconds)]
  }

  /// Loads the snapshot at `path`; if the file is replaced while it loads,
  /// loads again, so that the identity recorded is the one that was read.
  static func load(
    path: String, generation: Int, busyTimeoutMilliseconds: Int, cache: IndexCache?
  )
    throws(PipelineError) -> LoadedSnapshot
  {
    while true {
      let clock = ContinuousClock()
      let started = clock.now
      let before = SnapshotIdentity(path: path)
      let index: Index
      do {
        index = try SnapshotLoader.load(
          path: path, busyTimeoutMilliseconds: busyTimeoutMilliseconds, cache: cache
        ).index
      } catch { throw .snapshot(error) }
      guard let before, SnapshotIdentity(path: path) == before else { continue }
      return LoadedSnapshot(
        index: index, generation: generation, path: path, identity: before,
        loadedAtMillis: WallClock.nowMillis(), loadSeconds: (clock.now - started).seconds)
    }
  }
}

/// Loads new snapshots in the background, on SIGHUP or when the file is
/// replaced, while evaluation goes on with the one in use. The batch loop
/// takes a loaded snapshot between batches. A refused snapshot is logged
/// and the one in use stays.
final class SnapshotReloader: Sendable {
  private let path: String
  private let busyTimeoutMilliseconds: Int
  private let cache: IndexCache?
  private let log: StreamLog
  private let queue = DispatchQueue(label: "fanout.reload")
  // Set up once in init; DispatchSource is thread-safe.
  private nonisolated(unsafe) let watchTimer: DispatchSourceTimer

  private struct State {
    var ready: LoadedSnapshot?
    var loading = false
    var loadAgain = false
    var lastGeneration: Int
    /// The file last loaded or refused: the watcher reloads when it changes.
    var lastSeen: SnapshotIdentity?
    var refused = 0
    /// The file was missing when last looked at (logged once).
    var missing = false
  }
  private let state: Mutex<State>

  init(
    current: LoadedSnapshot, log: StreamLog, watchEvery seconds: Double,
    busyTimeoutMilliseconds: Int, cache: IndexCache?
  ) {
    path = current.path
    self.busyTimeoutMilliseconds = busyTimeoutMilliseconds
    self.cache = cache
    self.log = log
    state = Mutex(State(lastGeneration: current.generation, lastSeen: current.identity))
    watchTimer = DispatchSource.makeTimerSource(queue: DispatchQueue(label: "fanout.watch"))
    watchTimer.schedule(
      deadline: .now() + seconds, repeating: .milliseconds(Int(seconds * 1000)))
    watchTimer.setEventHandler { [weak self] in self?.checkFile() }
    watchTimer.resume()
  }

  deinit { watchTimer.cancel() }

  /// Snapshots refused so far.
  var refusedCount: Int { state.withLock { $0.refused } }

  /// Loads the file again (SIGHUP); a request while loading loads once more after.
  func reload(because reason: String) {
    let start = state.withLock { s -> Bool in
      if s.loading {
        s.loadAgain = true
        return false
      }
      s.loading = true
      return true
    }
    guard start else { return }
    log.event("reloading", "reloading the snapshot (\(reason))", ["reason": .text(reason)])
    queue.async { self.loadUntilSettled() }
  }

  /// A loaded snapshot not yet in use, if any.
  func takeReady() -> LoadedSnapshot? {
    state.withLock { s in
      defer { s.ready = nil }
      return s.ready
    }
  }

  private func checkFile() {
    guard let seen = SnapshotIdentity(path: path) else {
      // Gone: mid-replacement, or deleted. Said once; the snapshot in use stays.
      let firstTime = state.withLock { state in
        defer { state.missing = true }
        return !state.missing
      }
      if firstTime {
        let reason = String(cString: strerror(errno))
        log.event(
          "snapshot_gone",
          "the snapshot file '\(path)' is gone (\(reason)); "
            + "the snapshot in use stays until a file is there again", level: .warning,
          ["path": .text(path), "error": .text(reason)])
      }
      return
    }
    state.withLock { $0.missing = false }
    if state.withLock({ $0.lastSeen != seen && !$0.loading }) {
      reload(because: "the file was replaced")
    }
  }

  private func loadUntilSettled() {
    while true {
      let generation = state.withLock { $0.lastGeneration + 1 }
      let seen = SnapshotIdentity(path: path)
      do {
        let loaded = try LoadedSnapshot.load(
          path: path, generation: generation, busyTimeoutMilliseconds: busyTimeoutMilliseconds,
          cache: cache)
        state.withLock {
          $0.ready = loaded
          $0.lastGeneration = generation
          $0.lastSeen = loaded.identity
        }
        log.event(
          "snapshot_loaded",
          "snapshot generation \(generation) loaded in \(threeDecimals(loaded.loadSeconds)) s "
            + "(inode \(loaded.identity.inode)); it is used from the next batch", loaded.logFields)
      } catch {
        state.withLock {
          $0.lastSeen = seen
          $0.refused += 1
        }
        log.event(
          "snapshot_refused", "new snapshot refused, the one in use stays: \(error)",
          level: .warning, ["error": .text("\(error)")])
      }
      let again = state.withLock { s -> Bool in
        if s.loadAgain {
          s.loadAgain = false
          return true
        }
        s.loading = false
        return false
      }
      if !again { return }
    }
  }
}
