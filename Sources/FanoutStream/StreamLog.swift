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
  /// A JSON document (the status event's metrics object).
  case json(JSONValue)
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
      // (A message may name what someone else made: its control
      // characters are shown, not sent to the terminal.)
      bytes = Array("fanout stream: \(Printable.text(message, keepingLines: false))\n".utf8)
    case .json:
      let line = JSONValue.object([
        ("time", .string(LocalTime.rfc3339UTC(millis: WallClock.nowMillis()))),
        ("level", .string(level.rawValue)), ("event", .string(name)),
        ("message", .string(message)),
        (
          "fields",
          .object(
            fields.map { key, value in
              switch value {
              case .text(let text): (key, .string(text))
              case .int(let number): (key, .int(Int64(number)))
              case .decimal(let value): (key, .number(threeDecimals(value)))
              case .json(let json): (key, json)
              }
            })
        ),
      ])
      bytes = Array((line.rendered(.line) + "\n").utf8)
    }
    _ = bytes.withUnsafeMutableBytes { write(STDERR_FILENO, $0.baseAddress, $0.count) }
  }
}
