import FanoutModel
import Testing

@Suite("numbers written with fixed decimals (summary.json's times and cores)")
struct FixedPointTests {
  @Test(
    "exactly the decimals asked for, rounded, never in exponent form",
    arguments: [
      (1.5, 3, "1.500"), (0.0004999, 3, "0.000"), (-0.25, 2, "-0.25"), (2.0, 0, "2"),
      (1.0 / 3.0, 6, "0.333333"), (1.846, 2, "1.85"), (123_456.7, 6, "123456.700000"),
      (Double.nan, 2, "0.00"), (1e300, 2, "1000000000000.00"),
      (-Double.infinity, 1, "-1000000000000.0"),
    ] as [(Double, Int, String)])
  func written(value: Double, decimals: Int, text: String) {
    #expect(fixedPoint(value, decimals: decimals) == text)
  }
}
