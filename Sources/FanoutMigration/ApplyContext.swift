import FanoutIndex
import FanoutModel
import FanoutSQLite
import FanoutSnapshot
import FanoutTime
import FanoutTraffic
import FoundationEssentials

/// A refusal of the entry being applied; `PrefsApply` adds its number.
struct EntryError: Error {
  let reason: String
  /// Set when the file could not be written (a full disk): not the entry's fault.
  var storage: SQLiteError? = nil
  init(_ reason: String) { self.reason = reason }
}

/// What the format adapters share: lookups in the snapshot being changed,
/// the client-side user, the clock, and the editor that writes the rows.
final class ApplyContext {
  let index: Index
  let editor: SnapshotEditor
  let asUser: String?
  let now: Int64
  private let timeZones = TimeZoneDatabase()

  init(index: Index, editor: SnapshotEditor, asUser: String?, now: Int64)
    throws(ApplyError)
  {
    self.index = index
    self.editor = editor
    self.asUser = asUser
    self.now = now
    if let asUser, index.users.find(asUser) == nil {
      throw .usage("--as-user: unknown user \(Bounded.quoted(asUser))")
    }
  }

  /// Decodes `data`, a request of `shape`, as `T`, naming the JSON path of
  /// what does not fit: a field the format does not have, a value of the
  /// wrong type.
  static func decode<T: Decodable>(_ type: T.Type, _ data: Data, shape: ChangeShape)
    throws(ApplyError) -> T
  {
    let decoder = JSONDecoder()
    // The systems' fields are snake_case; the Swift names are camelCase.
    decoder.keyDecodingStrategy = .convertFromSnakeCase
    // Syntax first, strictly, so that an error says where it is.
    if let syntax = JSONDocument.firstError(in: Array(data)) {
      throw .malformed(path: "$", reason: syntax)
    }
    try shape.check(data)
    do {
      return try decoder.decode(type, from: data)
    } catch let error as DecodingError {
      throw Self.describe(error)
    } catch {
      throw .malformed(path: "$", reason: "\(error)")
    }
  }

  private static func describe(_ error: DecodingError) -> ApplyError {
    func path(_ keys: [any CodingKey]) -> String {
      "$" + keys.map { $0.intValue.map { "[\($0)]" } ?? ".\(snakeCase($0.stringValue))" }.joined()
    }
    switch error {
    case .typeMismatch(let type, let c):
      return .malformed(path: path(c.codingPath), reason: "expected \(jsonName(type))")
    case .valueNotFound(let type, let c):
      return .malformed(path: path(c.codingPath), reason: "expected \(jsonName(type)), found null")
    case .keyNotFound(let key, let c):
      return .malformed(path: path(c.codingPath + [key]), reason: "missing")
    case .dataCorrupted(let c):
      return .malformed(path: path(c.codingPath), reason: c.debugDescription)
    @unknown default: return .malformed(path: "$", reason: "\(error)")
    }
  }

  /// A Swift type as JSON calls its values: what a request's author knows.
  private static func jsonName(_ type: Any.Type) -> String {
    switch type {
    case is String.Type: "a string"
    case is Bool.Type: "true or false"
    case is Int.Type, is Int64.Type, is Int32.Type: "a whole number"
    case is Double.Type: "a number"
    default:
      "\(type)".hasPrefix("Dictionary")
        ? "an object" : "\(type)".hasPrefix("Array") ? "an array" : "a value"
    }
  }

  /// A field name as the request spells it (`userId` → `user_id`).
  private static func snakeCase(_ name: String) -> String {
    String(name.flatMap { $0.isUppercase ? ["_"] + $0.lowercased() : [$0] })
  }

  /// Applies `entries` in order, numbering refusals from 1.
  func each<E>(_ entries: [E], _ body: (E) throws(EntryError) -> Void) throws(ApplyError) -> Int {
    for (i, entry) in entries.enumerated() {
      do {
        try body(entry)
      } catch {
        if let storage = error.storage { throw .write(path: editor.path, reason: storage.message) }
        throw .entry(number: i + 1, reason: error.reason)
      }
    }
    return entries.count
  }

  // MARK: Checks that name what is wrong

  /// The entry's user: `given`, or the client-side user when it is omitted.
  func user(_ given: String?, field: String) throws(EntryError) -> String {
    if let asUser {
      guard given == nil || given == asUser else {
        throw EntryError(
          "\(field) \(Bounded.quoted(given!)) is not the --as-user \(Bounded.quoted(asUser)): a client may change only its own user's preferences"
        )
      }
      return asUser
    }
    guard let given else { throw EntryError("\(field) is missing (or give --as-user)") }
    guard index.users.find(given) != nil else {
      throw EntryError("unknown user \(Bounded.quoted(given))")
    }
    return given
  }

  /// In the client-side mode (`--as-user`) an entry changes only its own
  /// user's rows: registering a token that another user holds would move
  /// that user's device, so it is refused. The server-side mode (no
  /// `--as-user`) moves it, as the push services' own registries do.
  func mayTake(gateway: String, token: String, for user: String) throws(EntryError) {
    guard asUser != nil else { return }
    let holder: String?
    do { holder = try editor.holder(gateway: gateway, token: token) } catch {
      throw EntryError(error.description)
    }
    if let holder, holder != user {
      throw EntryError(
        "the \(gateway) token is registered to another user ('\(Bounded.text(holder))'): with "
          + "--as-user an entry may not move another user's device")
    }
  }

  func channel(_ id: String) throws(EntryError) -> String {
    guard index.channels.find(id) != nil else {
      throw EntryError("unknown channel \(Bounded.quoted(id))")
    }
    return id
  }

  /// Whether category `name` is mandatory, and the gateways mandatory in it.
  func category(_ name: String) throws(EntryError) -> (mandatory: Bool, gateways: [String]) {
    guard let found = index.categoryMandates(name) else {
      throw EntryError("unknown category \(Bounded.quoted(name))")
    }
    return found
  }

  func gateway(_ name: String) throws(EntryError) -> String {
    guard SnapshotSchema.isValidGatewayName(name) else {
      throw EntryError(
        "\(Bounded.quoted(name)) is not a valid gateway name ([a-z0-9][a-z0-9._-]*, not decisions, summary, rejected or batches)"
      )
    }
    return name
  }

  func timeZone(_ name: String) throws(EntryError) -> String {
    do { _ = try timeZones.zone(named: name) } catch { throw EntryError("unknown \(error)") }
    return name
  }

  /// Runs one editor call, turning an SQLite failure into a refusal of
  /// the entry, unless the file could not be written (exit 73, not 65).
  func write(_ body: (SnapshotEditor) throws(SQLiteError) -> Void) throws(EntryError) {
    do { try body(editor) } catch {
      var refusal = EntryError("cannot write: \(error.message)")
      if error.isStorageFailure { refusal.storage = error }
      throw refusal
    }
  }

  /// Sets level columns; an entry that sets nothing is refused (a misspelt
  /// field would otherwise pass silently).
  func set(_ target: LevelTarget, _ columns: [(String, ColumnValue)], known: String)
    throws(EntryError)
  {
    guard !columns.isEmpty else { throw EntryError("the entry changes nothing (fields: \(known))") }
    try write { (e) throws(SQLiteError) in try e.set(target, columns) }
  }

  /// The snooze columns for `[start, until)`; nil: no snooze.
  static func snooze(_ window: (start: Int64?, until: Int64)?) -> [(String, ColumnValue)] {
    [
      ("snooze_start", window?.start.map(ColumnValue.int) ?? .null),
      ("snooze_until", window.map { .int($0.until) } ?? .null),
    ]
  }
}

/// A value that may be a JSON string or integer (TDLib chat ids), as text.
struct StringOrInteger: Decodable {
  let text: String
  init(from decoder: any Decoder) throws {
    let c = try decoder.singleValueContainer()
    if let s = try? c.decode(String.self) {
      text = s
    } else {
      text = String(try c.decode(Int64.self))
    }
  }
}
