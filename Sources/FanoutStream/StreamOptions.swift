import FanoutEngine
import FanoutPipeline
import FanoutSnapshot

/// FanoutStream owns `fanout stream`, the long-running pipeline stage:
/// messages read continuously (standard input or a Unix socket) through a
/// bounded queue, evaluated in micro-batches against the snapshot in use,
/// written as rotated LZ4 segments or one NDJSON stream, with the snapshot
/// reloaded in the background and swapped between batches.

/// Where the stream reads messages from.
public enum StreamInputSource: Sendable, Equatable {
  case standardInput
  /// A Unix domain socket at this path; each connection is one producer.
  case socket(path: String)
}

/// Where the stream writes.
public enum StreamDestination: Sendable, Equatable {
  /// Rotated segment files in a folder.
  case directory(String)
  /// One multiplexed NDJSON stream on standard output.
  case standardOutput
}

/// What `fanout stream` is asked to do.
public struct StreamOptions: Sendable {
  public var snapshot: String
  public var input: StreamInputSource
  public var destination: StreamDestination
  /// A batch closes at this many input lines…
  public var batchLines = 1_000
  /// …or this long after its first line arrived, whichever comes first.
  public var batchMilliseconds = 50.0
  /// A segment is closed (its files renamed to their final names) once one
  /// of its files reaches this many bytes…
  public var rotateBytes = 64 << 20
  /// …or it is this old and holds at least one batch.
  public var rotateSeconds = 60.0
  public var threads = 1
  /// The status line and the metrics file are written this often.
  public var statusSeconds = 10.0
  /// The metrics file: JSON, or Prometheus' text format for a `.prom` name.
  public var metricsPath: String?
  public var logFormat = LogFormat.text
  /// How often the snapshot file is checked for replacement.
  public var watchSeconds = 1.0
  /// A longer input line is rejected (with its producer and number) and
  /// skipped to its line end, so that no producer can grow memory unboundedly.
  public var maxLineBytes = 1 << 20
  /// The option that sets `maxLineBytes`, as a rejected line's reason names it.
  static let maxLineBytesOption = "--max-line-bytes"
  /// Written once the stage reads its input (after the snapshot loaded and
  /// the socket listens): a readiness signal for supervisors and scripts.
  public var readyFile: String?
  /// How long a (re)load waits for a writer holding the snapshot locked.
  public var busyTimeoutMilliseconds = Pipeline.defaultBusyTimeoutMilliseconds
  /// Where compiled snapshots are read from and added to; nil for none.
  public var indexCache: IndexCache? = nil

  public init(snapshot: String, input: StreamInputSource, destination: StreamDestination) {
    self.snapshot = snapshot
    self.input = input
    self.destination = destination
  }

  /// Input lines held between reading and evaluation: four batches.
  public var queueLines: Int { 4 * batchLines }
}
