/// FanoutPipeline owns a whole run: snapshot → index → traffic → kernel →
/// output. It is the one API the command line and the end-to-end tests call.
import FanoutModel
import FanoutOutput
import FanoutSnapshot
import FanoutTraffic

/// Why a run stopped, with the process exit code it maps to (sysexits.h).
public enum PipelineError: Error, CustomStringConvertible {
  /// A bad command line or output folder; nothing was written.
  case usage(String)
  /// The snapshot was refused; nothing was written.
  case snapshot(SnapshotError)
  /// The messages could not be read.
  case input(TrafficInputError)
  /// An output file could not be written; no partial file is left under a final name.
  case output(OutputError)
  /// `fanout merge` refused its shards' outputs (missing, incomplete or
  /// not of one split and one traffic); nothing was written.
  case merge(String)
  /// More traffic lines were rejected than `--max-rejected` allows; nothing was written.
  case rejectedLines(String)

  public var description: String {
    switch self {
    case .usage(let text): text
    case .snapshot(let e): e.description
    case .input(let e): e.description
    case .output(let e): e.description
    case .merge(let reason): "cannot merge: \(reason)"
    case .rejectedLines(let reason): reason
    }
  }

  public var exitStatus: ExitStatus {
    switch self {
    case .usage: .usage
    case .snapshot(let e): e.exitStatus
    case .input: .noInput
    case .output: .cannotCreate
    case .merge, .rejectedLines: .dataError
    }
  }
}
