import Dispatch
import FanoutModel

/// The structural promises the kernel's unchecked reads rely on: every
/// offset, count and row number inside the column it points into, and the
/// sorted orders its merge walks and binary searches assume.
///
/// A compiled index file is checked whole against them in every build
/// before it is used (`Index(reading:zone:)`): a file that was changed,
/// checksums and all, is refused rather than read out of bounds. An index
/// the loader builds from SQLite is checked in builds with
/// `FANOUT_INTERNAL_CHECKS` (debug builds, so the test suite runs with them).
extension Index {
  /// The first few broken promises, described; empty for a well-formed index.
  ///
  /// - Complexity: one pass over every column, O(users + channels + members
  ///   + devices + rows of the smaller tables).
  package func invariantViolations() -> [String] {
    var found: [String] = []
    func check(_ holds: Bool, _ what: @autoclosure () -> String) {
      if !holds { found.append(what()) }
    }
    /// CSR offsets: `rows + 1` of them, from 0 to `values`, never decreasing.
    func checkCSR<T: BinaryInteger>(_ name: String, _ offsets: Column<T>, rows: Int, values: Int) {
      guard offsets.count == rows + 1 else {
        return found.append("\(name): \(offsets.count) offsets for \(rows) rows")
      }
      check(offsets.first == 0, "\(name): does not start at 0")
      let last = offsets.last.map { Int($0) } ?? -1
      check(last == values, "\(name): ends at \(last), not \(values)")
      // Without branches, so that it is vectorized.
      let buffer = offsets.buffer
      var decreases: UInt8 = 0
      for i in buffer.indices.dropFirst() { decreases |= buffer[i - 1] > buffer[i] ? 1 : 0 }
      check(decreases == 0, "\(name): offsets decrease")
    }
    let userCount = users.count
    let channelCount = channels.count
    let gatewayCount = gateways.count
    let categoryCount = categories.count
    let deviceCount = deviceIDs.count

    // Lengths and CSR offsets first: the checks below index by them.
    checkCSR("channelMembers", channelMembers, rows: channelCount, values: memberUser.count)
    checkCSR("userDevices", userDevices, rows: userCount, values: deviceCount)
    checkCSR("userCategoryPrefs", userCategoryPrefs, rows: userCount, values: categoryPref.count)
    check(snoozeBounds.count % 2 == 0, "snoozeBounds: an odd number of bounds")
    checkCSR(
      "snoozeGroups", snoozeGroups, rows: max(0, snoozeGroups.count - 1),
      values: snoozeBounds.count / 2)
    checkCSR("mutedBy", mutedBy.offsets, rows: userCount, values: mutedBy.muters.count)
    checkCSR(
      "threadPrefs", threadPrefs.starts, rows: threadPrefs.keys.count,
      values: threadPrefs.users.count)
    check(presence.bounds.count % 2 == 0, "presence: an odd number of bounds")
    checkCSR("presence", presence.starts, rows: userCount, values: presence.bounds.count / 2)
    check(dndWords.count % DNDPattern.wordCount == 0, "dndWords: not whole patterns")
    let lengths: [(String, Int, Int)] = [
      ("userJSON", userJSON.count, userCount), ("userZone", userZone.count, userCount),
      ("userDND", userDND.count, userCount), ("userState", userState.count, userCount),
      ("userQuietActions", userQuietActions.count, userCount),
      ("deviceGateway", deviceGateway.count, deviceCount),
      ("deviceRestricted", deviceRestricted.count, deviceCount),
      ("deviceJSON", deviceJSON.count, deviceCount),
      ("channelScope", channelScope.count, channelCount),
      ("memberSettings", memberSettings.count, memberUser.count),
      ("memberSnooze", memberSnooze.count, memberUser.count),
      ("gatewayJSON", gatewayJSON.count, gatewayCount),
      ("categoryMandatory", categoryMandatory.count, categoryCount),
      ("categoryDefault", categoryDefault.count, categoryCount),
      ("categoryGatewayMandatory", categoryGatewayMandatory.count, categoryCount * gatewayCount),
      ("categoryPrefCategory", categoryPrefCategory.count, categoryPref.count),
      ("categoryPrefGateway", categoryPrefGateway.count, categoryPref.count),
      ("threadPrefs levels", threadPrefs.levels.count, threadPrefs.users.count),
    ]
    for (name, count, expected) in lengths where count != expected {
      found.append("\(name): \(count) values, not \(expected)")
    }
    check(
      declaredMemberCount.isEmpty || declaredMemberCount.count == channelCount,
      "declaredMemberCount: wrong length")
    guard found.isEmpty else { return found }

    // The row numbers and the sorted orders, each a pass over the members,
    // on two cores at once; the row numbers' findings come first.
    let halves = UnsafeMutableBufferPointer<[String]>.allocate(capacity: 2)
    halves.initialize(repeating: [])
    defer {
      _ = halves.deinitialize()
      halves.deallocate()
    }
    // (Each iteration writes its own slot only.)
    nonisolated(unsafe) let slots = halves
    DispatchQueue.concurrentPerform(iterations: 2) { half in
      slots[half] = half == 0 ? rowViolations() : orderViolations()
    }
    return halves[0].isEmpty ? halves[1] : halves[0]
  }

  /// Row numbers inside what they point into (the lengths checked).
  private func rowViolations() -> [String] {
    var found: [String] = []
    /// Every value a row number below `limit` (or -1 where `allowNone`).
    func checkRows<T: BinaryInteger>(
      _ name: String, _ values: UnsafeBufferPointer<T>, below limit: Int, allowNone: Bool = false
    ) {
      let low: Int = allowNone ? -1 : 0
      // A pass without branches (vectorized), then the first culprit, if any.
      var outside: UInt8 = 0
      for value in values { outside |= Int(value) < low || Int(value) >= limit ? 1 : 0 }
      guard outside != 0 else { return }
      for (i, value) in values.enumerated() where Int(value) < low || Int(value) >= limit {
        return found.append("\(name) \(i): \(value) is not a row below \(limit)")
      }
    }
    let userCount = users.count
    let gatewayCount = gateways.count
    let categoryCount = categories.count
    // Row numbers inside what they point into.
    checkRows("memberUser", memberUser.buffer, below: userCount)
    checkRows("userZone", userZone.buffer, below: zones.count)
    checkRows(
      "userDND", userDND.buffer, below: dndWords.count / DNDPattern.wordCount, allowNone: true)
    checkRows("deviceGateway", deviceGateway.buffer, below: gatewayCount)
    checkRows("categoryPrefCategory", categoryPrefCategory.buffer, below: categoryCount)
    checkRows(
      "categoryPrefGateway", categoryPrefGateway.buffer, below: gatewayCount, allowNone: true)
    checkRows("mutedBy", mutedBy.muters.buffer, below: userCount)
    checkRows("threadPrefs users", threadPrefs.users.buffer, below: userCount)
    let groupCount = snoozeGroups.count - 1
    // As above: a pass without branches, then the culprit.
    let (settingsBuffer, snoozeBuffer) = (memberSettings.buffer, memberSnooze.buffer)
    var broken: UInt8 = 0
    for slot in 0..<min(settingsBuffer.count, snoozeBuffer.count) {
      let (settings, group) = (settingsBuffer[slot], snoozeBuffer[slot])
      broken |= settings.hasSnooze != (group >= 0) || Int(group) >= groupCount ? 1 : 0
    }
    guard broken != 0 else { return found }
    for (slot, (settings, group)) in zip(memberSettings.buffer, memberSnooze.buffer).enumerated() {
      // A slot flagged for snooze has a group, and only such a slot has
      // one. (The chat level's two bits have four meanings: three levels
      // and the channel's default.)
      guard settings.hasSnooze == (group >= 0), Int(group) < groupCount else {
        found.append("slot \(slot): snooze group \(group) out of range or not flagged")
        break
      }
    }
    return found
  }

  /// The sorted orders (the lengths and offsets checked).
  private func orderViolations() -> [String] {
    var found: [String] = []
    let userCount = users.count
    // Sorted orders: members by user row (the merge walks with mentions and
    // the slot searches rely on it), devices by id, the lists `SingledOut`
    // walks alongside members, thread keys, presence windows.
    // Over the columns' own buffers: no copy of a 1M-entry offset column.
    func ascending<T: Comparable, O: BinaryInteger>(
      _ name: String, _ values: UnsafeBufferPointer<T>, runs: UnsafeBufferPointer<O>
    ) {
      for r in 0..<max(0, runs.count - 1) {
        let (start, end) = (Int(runs[r]), Int(runs[r + 1]))
        guard end - start > 1 else { continue }
        for i in (start + 1)..<end where values[i - 1] >= values[i] {
          return found.append("\(name) \(r): not in strictly increasing order at \(i)")
        }
      }
    }
    ascending("channel members", memberUser.buffer, runs: channelMembers.buffer)
    ascending("user devices", deviceIDs.buffer, runs: userDevices.buffer)
    ascending("mutedBy", mutedBy.muters.buffer, runs: mutedBy.offsets.buffer)
    ascending("threadPrefs", threadPrefs.users.buffer, runs: threadPrefs.starts.buffer)
    [0, threadPrefs.keys.count].withUnsafeBufferPointer {
      ascending("threadPrefs keys", threadPrefs.keys.buffer, runs: $0)
    }
    // Each user's windows: starts ascending, each window non-empty.
    let bounds = presence.bounds.buffer
    for u in 0..<userCount {
      var previousUntil = Int64.min
      for w in Int(presence.starts[u])..<Int(presence.starts[u + 1]) {
        guard bounds[2 * w] > previousUntil || w == Int(presence.starts[u]),
          bounds[2 * w] < bounds[2 * w + 1]
        else { return found + ["presence: user \(u)'s windows are not sorted and apart"] }
        previousUntil = bounds[2 * w + 1]
      }
    }
    return found
  }

  /// Whether this build checks the invariants of every index it builds from SQLite.
  #if FANOUT_INTERNAL_CHECKS
    package static let internalChecks = true
  #else
    package static let internalChecks = false
  #endif

  /// Stops on a broken invariant, in builds with internal checks (the
  /// loader calls it on every index it builds from SQLite).
  @inline(__always)
  package func checkInvariants() {
    #if FANOUT_INTERNAL_CHECKS
      let violations = invariantViolations()
      precondition(violations.isEmpty, "index invariants broken: \(violations)")
    #endif
  }
}
