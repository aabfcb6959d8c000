extension Duration {
  /// The duration in seconds, as a `Double`.
  package var seconds: Double {
    let (whole, attoseconds) = components
    return Double(whole) + Double(attoseconds) * 1e-18
  }
}
