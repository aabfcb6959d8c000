extension Int64 {
  /// `self + other`, held at `.max` or `.min` where it would overflow: an
  /// instant plus a delay past the end of Int64's range is its end (any
  /// input's times and durations are Int64s; arithmetic never traps).
  @inlinable public func addingSaturated(_ other: Int64) -> Int64 {
    let (sum, overflow) = addingReportingOverflow(other)
    return overflow ? (other > 0 ? .max : .min) : sum
  }

  /// `self × other`, held at `.max` or `.min` where it would overflow.
  @inlinable public func multipliedSaturated(by other: Int64) -> Int64 {
    let (product, overflow) = multipliedReportingOverflow(by: other)
    return overflow ? ((self < 0) == (other < 0) ? .max : .min) : product
  }

  /// `self − other`, held at `.max` or `.min` where it would overflow.
  @inlinable public func subtractingSaturated(_ other: Int64) -> Int64 {
    let (difference, overflow) = subtractingReportingOverflow(other)
    return overflow ? (other > 0 ? .min : .max) : difference
  }
}
