/// The DND windows as the schema stores them (users.dnd_start/dnd_end,
/// dnd_weekly rows): what `fanout explain` shows and `fanout prefs apply`
/// writes.

/// A daily DND window as stored: minutes of the local day.
public struct DailyWindow: Sendable, Equatable {
  public var start: Int
  public var end: Int

  public init(start: Int, end: Int) {
    self.start = start
    self.end = end
  }
}

/// A weekly DND window as stored: ISO weekday, `[start, end)` minutes.
public struct WeeklyWindow: Sendable, Equatable {
  public var weekday: Int
  public var start: Int
  public var end: Int

  public init(weekday: Int, start: Int, end: Int) {
    self.weekday = weekday
    self.start = start
    self.end = end
  }
}
