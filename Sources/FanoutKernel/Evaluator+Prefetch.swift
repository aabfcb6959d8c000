import CPrefetch

/// Prefetching: the cache lines a message's evaluation will wait on, asked
/// for ahead of time (see `prefetch(_:ahead:end:)`).
extension Evaluator {
  /// Asks for the cache lines later messages start with, far enough ahead
  /// that each arrives in time: a message's member list bounds and its
  /// channel's default chat level 8 messages ahead, its first slots 4
  /// ahead, its first members' user records 3 ahead, where the users who
  /// muted its sender lie 8 ahead; with lines on, where its channel's name
  /// lies 8 ahead and the name 4 ahead, where its first members' device
  /// fragments lie 2 ahead and the fragments of the first two 1 ahead.
  /// (Within a message, `evaluateMessage` asks 8 members ahead, and for
  /// fragments from the third member on: in direct and small channels,
  /// most messages have no member that far in.) Without this, each message
  /// waits on dependent cache misses.
  @inline(__always)
  func prefetch(
    _ channels: UnsafeBufferPointer<Int32>, _ senders: UnsafeBufferPointer<Int32>, ahead m: Int,
    end: Int
  ) {
    let c = columns
    if writeLines { prefetchChannelNames(channels, ahead: m, end: end) }
    prefetchMessageStarts(channels, senders, ahead: m, end: end, terms: c)
    if m &+ 3 < end {
      for slot in leadingSlots(of: channels[m &+ 3], Self.membersAhead) {
        cprefetch_read(c.userState.baseAddress! + Int(c.memberUser[slot]))
      }
    }
    guard writeLines else { return }
    if m &+ 2 < end {
      let slots = leadingSlots(of: channels[m &+ 2], Self.deviceOffsetsAhead)
      for slot in slots { prefetchDeviceOffsets(slot, before: slots.upperBound) }
    }
    if m &+ 1 < end {
      let slots = leadingSlots(of: channels[m &+ 1], Self.deviceLinesAhead)
      for slot in slots { prefetchDeviceLines(slot, before: slots.upperBound) }
    }
  }

  /// What deciding later messages reads first: where their member lists
  /// lie, their channel's default chat level and where their sender's
  /// muters lie 8 messages ahead, their first members and member settings
  /// 4 ahead. The default and muters are `terms`'s: the columns of the
  /// index whose message terms are taken (this evaluator's, or A's for a
  /// what-if side that decides again only A's quiet pairs).
  @inline(__always)
  func prefetchMessageStarts<Rows: RandomAccessCollection<Int32>>(
    _ channels: Rows, _ senders: Rows, ahead m: Int, end: Int, terms: IndexColumns
  ) where Rows.Index == Int {
    let c = columns
    if m &+ 8 < end {
      cprefetch_read(c.channelMembers.baseAddress! + Int(channels[m &+ 8]))
      cprefetch_read(terms.channelDefaultChat.baseAddress! + Int(channels[m &+ 8]))
      if senders[m &+ 8] >= 0 {
        cprefetch_read(terms.muterOffsets.baseAddress! + Int(senders[m &+ 8]))
      }
    }
    if m &+ 4 < end {
      let first = c.channelMembers[Int(channels[m &+ 4])]
      cprefetch_read(c.memberUser.baseAddress! + first)
      cprefetch_read(c.memberSettings.baseAddress! + first)
    }
  }

  /// The channel names later messages' lines start with
  /// (`buildLinePrefix`): where a name lies 8 messages ahead, its bytes 4
  /// ahead.
  @inline(__always)
  func prefetchChannelNames<Channels: RandomAccessCollection<Int32>>(
    _ channels: Channels, ahead m: Int, end: Int
  ) where Channels.Index == Int {
    let names = columns.channelNames
    if m &+ 8 < end { cprefetch_read(names.offsets.baseAddress! + Int(channels[m &+ 8])) }
    if m &+ 4 < end {
      cprefetch_read(names.bytes.baseAddress! + names.offsets[Int(channels[m &+ 4])])
    }
  }

  /// The membership slots of `channel`'s first `count` members (fewer if it has fewer).
  @inline(__always)
  func leadingSlots(of channel: Int32, _ count: Int) -> Range<Int> {
    let first = columns.channelMembers[Int(channel)]
    return first..<min(columns.channelMembers[Int(channel) &+ 1], first &+ count)
  }

  /// The rows in `muters` of the users who muted user row `sender` (none
  /// for -1).
  @inline(__always)
  func muterRows(of sender: Int32) -> Range<Int> {
    let c = columns
    return sender < 0
      ? 0..<0 : Int(c.muterOffsets[Int(sender)])..<Int(c.muterOffsets[Int(sender) &+ 1])
  }

  /// How many members ahead a user record is asked for.
  static let membersAhead = 8
  /// With lines on, how many members ahead where a member's device
  /// fragments lie is asked for, and then the fragments.
  static let deviceOffsetsAhead = 5
  static let deviceLinesAhead = 2

  /// Asks for the user record of the member in `slot`, if `slot < end`.
  @inline(__always)
  func prefetchUser(_ slot: Int, before end: Int) {
    if slot < end { cprefetch_read(columns.userState.baseAddress! + Int(columns.memberUser[slot])) }
  }

  /// With lines on: asks for where the device fragments of the member in
  /// `slot` lie (its user record was asked for 3 members earlier).
  @inline(__always)
  func prefetchDeviceOffsets(_ slot: Int, before end: Int) {
    if slot < end { prefetchDeviceOffsets(user: Int(columns.memberUser[slot])) }
  }

  /// With lines on: asks for the device fragments of the member in `slot`
  /// (where they lie was asked for 3 members earlier), which a delivery copies.
  @inline(__always)
  func prefetchDeviceLines(_ slot: Int, before end: Int) {
    if slot < end { prefetchDeviceLines(user: Int(columns.memberUser[slot])) }
  }

  /// Asks for where user row `u`'s device fragments lie.
  @inline(__always)
  func prefetchDeviceOffsets(user u: Int) {
    let c = columns
    cprefetch_read(c.deviceJSON.offsets.baseAddress! + Int(c.userState[u].firstDevice))
  }

  /// Asks for user row `u`'s device fragments.
  @inline(__always)
  func prefetchDeviceLines(user u: Int) {
    let c = columns
    let state = c.userState[u]
    let first = Int(state.firstDevice)
    let devices = c.deviceCount(user: u, state)
    guard devices > 0 else { return }
    let bytes = c.deviceJSON.offsets[first]..<c.deviceJSON.offsets[first &+ devices]
    for line in stride(from: bytes.lowerBound, to: bytes.upperBound, by: 64) {
      cprefetch_read(c.deviceJSON.bytes.baseAddress! + line)
    }
  }
}
