/// What the rule chain reads about a recipient, in one 16-byte record, so
/// that a pair costs one cache line for its user rather than one per column:
/// DND pattern and zone, whether category preferences exist, and the user's
/// devices — their gateways and restrictions inline for up to four devices
/// on gateway rows below 128 (otherwise read from the device columns).
///
/// Derived from the user and device columns when the `Index` is built.
public struct UserState: Sendable, Equatable, BitwiseCopyable {
  /// The user's first device row (devices are grouped by user).
  public let firstDevice: Int32
  /// Index into the DND patterns, or -1 for none.
  public let dnd: Int32
  /// Index into the index's zones.
  public let zone: UInt16
  /// The number of devices, when they are inline.
  @usableFromInline let inlineCount: UInt8
  @usableFromInline let flags: UInt8
  /// Per inline device, one byte: gateway row (bits 0–6), restricted (bit 7).
  @usableFromInline let inlineGates: UInt32

  static let devicesInline: UInt8 = 1
  static let categoryPrefs: UInt8 = 2
  static let defers: UInt8 = 4
  static let presence: UInt8 = 8
  static let maxInlineDevices = 4
  static let maxInlineGateway = 127

  /// The record of a user whose devices are rows `devices` of the device columns.
  init(
    dnd: Int32, zone: UInt16, hasCategoryPrefs: Bool, defers: Bool, hasPresence: Bool,
    devices: Range<Int>,
    deviceGateway: Column<UInt16>, deviceRestricted: Column<Bool>
  ) {
    firstDevice = Int32(devices.lowerBound)
    self.dnd = dnd
    self.zone = zone
    let inline =
      devices.count <= Self.maxInlineDevices
      && devices.allSatisfy { Int(deviceGateway[$0]) <= Self.maxInlineGateway }
    var gates: UInt32 = 0
    if inline {
      for (k, d) in devices.enumerated() {
        gates |= (UInt32(deviceGateway[d]) | (deviceRestricted[d] ? 0x80 : 0)) << (8 * k)
      }
    }
    inlineGates = gates
    inlineCount = inline ? UInt8(devices.count) : 0
    flags =
      (inline ? Self.devicesInline : 0) | (hasCategoryPrefs ? Self.categoryPrefs : 0)
      | (defers ? Self.defers : 0) | (hasPresence ? Self.presence : 0)
  }

  /// Whether `inlineCount` and `inlineGate(_:)` describe the devices.
  @inlinable @inline(__always)
  public var hasInlineDevices: Bool { flags & 1 != 0 }

  /// Whether the user has any category preference row.
  @inlinable @inline(__always)
  public var hasCategoryPrefs: Bool { flags & 2 != 0 }

  /// Whether snooze and DND defer this user's pairs rather than drop them.
  @inlinable @inline(__always)
  public var defers: Bool { flags & 4 != 0 }

  /// Whether the user has any presence window.
  @inlinable @inline(__always)
  public var hasPresence: Bool { flags & 8 != 0 }

  /// The number of devices, when `hasInlineDevices`.
  @inlinable @inline(__always)
  public var inlineDeviceCount: Int { Int(inlineCount) }

  /// The `k`-th device's gateway row and restriction, when `hasInlineDevices`.
  @inlinable @inline(__always)
  public func inlineGate(_ k: Int) -> (gateway: Int, restricted: Bool) {
    let byte = (inlineGates &>> UInt32(8 &* k)) & 0xFF
    return (Int(byte & 0x7F), byte & 0x80 != 0)
  }
}
