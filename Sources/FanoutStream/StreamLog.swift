import FanoutModel
import FanoutPipeline
import FanoutTime

#if canImport(Glibc)
  import Glibc
#endif

/// How the stage's log lines are written (`--log-format`).
public enum LogFormat: String, Sendable, CaseIterable {
  /// `fanout stream: <message>`, for people.
  case text
  /// One JSON object per line, for log collectors:
  /// `{"time":…,"level":…,"event":…,"message":…,"fields":{…}}`.
  case json
}

public enum LogLevel: String, Sendable {
  case info, warning, error
}

/// A value in a log event's fields.
public enum LogValue: Sendable {
  case text(String)
  case int(Int)
  /// Written with three decimals.
  case decimal(Double)
  /// Already JSON (the status event's metrics object).
  case json([UInt8])
}

/// The stage's log on standard error, each line in one write so lines from
/// different threads never interleave. Every event has a stable name and
/// its values as fields; the text form shows only the message.
public struct StreamLog: Sendable {
  public let format: LogFormat

  public init(format: LogFormat) { self.format = format }

  public func event(
    _ name: String, _ message: String, level: LogLevel = .info,
    _ fields: KeyValuePairs<String, LogValue> = [:]
  ) {
    var bytes: [UInt8]
    switch format {
    case .text:
      bytes = Array("fanout stream: \(message)\n".utf8)
    case .json:
      bytes = Array(
        #"{"time":"\#(LocalTime.rfc3339UTC(millis: WallClock.nowMillis()))","level":"\#(level.rawValue)","event":"\#(name)","message":"#
          .utf8)
      bytes += JSONText.quoted(message)
      bytes += Array(#","fields":{"#.utf8)
      for (i, (key, value)) in fields.enumerated() {
        if i > 0 { bytes.append(UInt8(ascii: ",")) }
        bytes += JSONText.quoted(key)
        bytes.append(UInt8(ascii: ":"))
        switch value {
        case .text(let text): bytes += JSONText.quoted(text)
        case .int(let number): bytes += Array(String(number).utf8)
        case .decimal(let value): bytes += Array(threeDecimals(value).utf8)
        case .json(let json): bytes += json
        }
      }
      bytes += Array("}}\n".utf8)
    }
    _ = bytes.withUnsafeMutableBytes { write(STDERR_FILENO, $0.baseAddress, $0.count) }
  }
}
