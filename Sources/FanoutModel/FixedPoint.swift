/// `value` with exactly three decimals (`1.500`), as times are printed.
package func threeDecimals(_ value: Double) -> String { fixedPoint(value, decimals: 3) }

/// `value` with exactly `decimals` (0 to 6) decimals, never in exponent
/// form (a value beyond ±10^12 is written as that bound, NaN as 0).
package func fixedPoint(_ value: Double, decimals: Int) -> String {
  var scale = 1
  for _ in 0..<decimals { scale *= 10 }
  let bound = 1e12
  let finite = value.isNaN ? 0 : min(max(value, -bound), bound)
  let scaled = Int((finite * Double(scale)).rounded())
  guard decimals > 0 else { return String(scaled) }
  let sign = scaled < 0 ? "-" : ""
  let magnitude = abs(scaled)
  let fraction = String(magnitude % scale)
  return "\(sign)\(magnitude / scale)."
    + "\(String(repeating: "0", count: decimals - fraction.count))\(fraction)"
}
