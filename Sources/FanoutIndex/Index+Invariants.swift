/// The structural promises the kernel's merge walks and unchecked loads rely
/// on. The loader checks them when built with `FANOUT_INTERNAL_CHECKS`
/// (debug builds, so the test suite runs with them); release builds do not
/// pay for them.
extension Index {
  /// Every broken invariant, described; empty for a well-formed index.
  ///
  /// - Complexity: O(users + channels + members + devices + snooze bounds).
  package func invariantViolations() -> [String] {
    var found: [String] = []
    func check(_ holds: Bool, _ what: @autoclosure () -> String) {
      if !holds { found.append(what()) }
    }
    func checkCSR<C: RandomAccessCollection>(_ name: String, _ offsets: C, rows: Int, values: Int)
    where C.Element: BinaryInteger {
      check(offsets.count == rows + 1, "\(name): \(offsets.count) offsets for \(rows) rows")
      check(offsets.first == 0, "\(name): does not start at 0")
      check(
        offsets.last.map(Int.init) == values,
        "\(name): ends at \(String(describing: offsets.last)), not \(values)")
      check(zip(offsets, offsets.dropFirst()).allSatisfy { $0 <= $1 }, "\(name): offsets decrease")
    }
    let userCount = users.count
    checkCSR("channelMembers", channelMembers, rows: channels.count, values: memberUser.count)
    checkCSR("userDevices", userDevices, rows: userCount, values: deviceIDs.count)
    checkCSR(
      "userCategoryPrefs", userCategoryPrefs, rows: userCount, values: categoryPref.count)
    checkCSR(
      "snoozeGroups", snoozeGroups, rows: snoozeGroups.count - 1, values: snoozeBounds.count / 2)
    checkCSR("mutedBy", mutedBy.offsets, rows: userCount, values: mutedBy.muters.count)
    checkCSR(
      "threadPrefs", threadPrefs.starts, rows: threadPrefs.keys.count,
      values: threadPrefs.users.count)
    check(
      declaredMemberCount.isEmpty || declaredMemberCount.count == channels.count,
      "declaredMemberCount: wrong length")
    guard found.isEmpty else { return found }

    check(memberSettings.count == memberUser.count, "memberSettings: wrong length")
    check(memberSnooze.count == memberUser.count, "memberSnooze: wrong length")
    check(userState.count == userCount, "userState: wrong length")
    for c in 0..<channels.count {
      let slots = channelMembers[c]..<channelMembers[c + 1]
      // Members in strictly increasing user row order: the merge walks
      // with mentions and the slot searches rely on it.
      for s in slots where s > slots.lowerBound && memberUser[s - 1] >= memberUser[s] {
        found.append("channel \(c): members not in strictly increasing user order at slot \(s)")
        break
      }
    }
    check(
      memberUser.allSatisfy { $0 >= 0 && Int($0) < userCount }, "memberUser: a row out of range")
    for (s, group) in memberSnooze.enumerated() where group >= 0 {
      if Int(group) >= snoozeGroups.count - 1 || memberSettings[s].hasSnooze == false {
        found.append("slot \(s): snooze group \(group) out of range or not flagged")
        break
      }
    }
    for u in 0..<userCount where !(userDevices[u]..<userDevices[u + 1]).isEmpty {
      let ids = deviceIDs[Int(userDevices[u])..<Int(userDevices[u + 1])]
      if !zip(ids, ids.dropFirst()).allSatisfy({ $0 < $1 }) {
        found.append("user \(u): devices not in device_id order")
        break
      }
    }
    // The lists `SingledOut` walks alongside members ascend strictly too.
    func ascending(_ name: String, _ values: Column<Int32>, _ runs: Column<Int32>) {
      for r in 0..<(runs.count - 1) {
        let run = values[Int(runs[r])..<Int(runs[r + 1])]
        if !zip(run, run.dropFirst()).allSatisfy({ $0 < $1 }) {
          found.append("\(name) \(r): not in strictly increasing user order")
          return
        }
      }
    }
    ascending("mutedBy", mutedBy.muters, mutedBy.offsets)
    ascending("threadPrefs", threadPrefs.users, threadPrefs.starts)
    check(
      zip(threadPrefs.keys, threadPrefs.keys.dropFirst()).allSatisfy { $0 < $1 },
      "threadPrefs: keys not strictly increasing")
    return found
  }

  /// Whether this build checks the invariants of every index loaded.
  #if FANOUT_INTERNAL_CHECKS
    package static let internalChecks = true
  #else
    package static let internalChecks = false
  #endif

  /// Stops on a broken invariant, in builds with internal checks (the
  /// loader calls it on every index it builds).
  @inline(__always)
  package func checkInvariants() {
    #if FANOUT_INTERNAL_CHECKS
      let violations = invariantViolations()
      precondition(violations.isEmpty, "index invariants broken: \(violations)")
    #endif
  }
}
