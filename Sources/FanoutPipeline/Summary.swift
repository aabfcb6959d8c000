import FanoutModel

/// summary.json: counts in a fixed key order, then the run's times.
enum Summary {
  static func json(_ report: RunReport) -> [UInt8] {
    let c = report.counters
    let deliveries = report.gatewayNames.indices.filter { c.deliveries[$0] > 0 }
      .map { "\"\(report.gatewayNames[$0])\": \(c.deliveries[$0])" }
    let suppressed = Reason.allCases.map { "\"\($0.name)\": \(c.suppressed[Int($0.rawValue)])" }
    let t = report.timings
    let text = """
      {
        "messages": \(c.messages),
        "rejected": \(report.rejected),
        "pairs": \(c.pairs),
        "delivered": \(c.delivered),
        "deferred": \(c.deferred),
        "deliveries": {\(deliveries.joined(separator: ", "))},
        "suppressed": {\(suppressed.joined(separator: ", "))},
        "seconds": \(seconds(report.seconds)),
        "pairs_per_second": \(Int(report.pairsPerSecond.rounded())),
        "timings": {"load": \(seconds(t.load)), "parse": \(seconds(t.parse)), "evaluate": \(seconds(t.evaluate)), "write": \(seconds(t.write))}
      }

      """
    return Array(text.utf8)
  }

  /// Seconds to the microsecond, never in exponent form.
  static func seconds(_ s: Double) -> String {
    let micros = Int((s * 1e6).rounded())
    let fraction = String(micros % 1_000_000)
    return "\(micros / 1_000_000).\(String(repeating: "0", count: 6 - fraction.count))\(fraction)"
  }
}
