import FanoutSQLite
import FanoutTestSupport
import Testing

@testable import FanoutSnapshot

/// A token is registered once per gateway. When the file's own schema keeps
/// (gateway, token) unique — the contract's `UNIQUE (gateway, token)`, or an
/// index that implies it — SQLite has refused every duplicate already and
/// the load does not look for them; under any other schema the load finds
/// them itself.
@Suite("Device tokens: (gateway, token) unique")
struct DeviceTokenTests {
  private static let rows = """
    INSERT INTO users (user_id) VALUES ('u1'), ('u2');
    INSERT INTO devices VALUES (1, 'u1', 'apns', 't1'), (2, 'u2', 'fcm', 't2'), (3, 'u2', 'apns', 'T1');
    """

  private static let columns =
    "device_id INTEGER PRIMARY KEY, user_id TEXT NOT NULL, gateway TEXT NOT NULL, token TEXT NOT NULL"

  /// A schema with `devices` defined as `definition` (its columns, then
  /// `extra`), followed by `after` (indexes).
  private static func schema(_ extra: String = "", after: String = "") -> String {
    let table = "CREATE TABLE devices (\(columns)\(extra));\n"
    return SnapshotRefusalTests.schema(replacing: "devices", with: table) + after
  }

  /// Schemas under which SQLite itself keeps the pairs unique.
  static let keepingSchemas: [String] = [
    SQLiteFixture.schema,
    schema(", UNIQUE (token, gateway)"),
    schema(", UNIQUE (token)"),
    schema(after: "CREATE UNIQUE INDEX pairs ON devices (gateway COLLATE NOCASE, token);"),
    schema(after: "CREATE UNIQUE INDEX pairs ON devices (gateway, token COLLATE RTRIM DESC);"),
  ]

  /// Schemas that let a duplicate pair in: no index, a wider one, a
  /// partial one, one on an expression.
  static let laxSchemas: [String] = [
    schema(),
    schema(", UNIQUE (gateway, token, device_id)"),
    schema(after: "CREATE UNIQUE INDEX pairs ON devices (gateway, token) WHERE device_id < 3;"),
    schema(after: "CREATE UNIQUE INDEX pairs ON devices (gateway, token || device_id);"),
    schema(after: "CREATE INDEX pairs ON devices (gateway, token);"),
  ]

  @Test("a schema that keeps the pairs unique spares the check", arguments: keepingSchemas)
  func keeping(_ schema: String) throws {
    let path = SQLiteFixture.make(SQLiteFixture.header + Self.rows, schema: schema)
    #expect(try Connection(path: path).keepsDeviceTokensUnique())
    let snapshot = try SnapshotLoader.load(path: path)
    #expect(snapshot.index.deviceIDs.count == 3)
  }

  @Test("under any other schema the load finds a duplicate itself", arguments: laxSchemas)
  func lax(_ schema: String) throws {
    let duplicate = "INSERT INTO devices VALUES (4, 'u1', 'fcm', 't2');"
    let path = SQLiteFixture.make(SQLiteFixture.header + Self.rows + duplicate, schema: schema)
    #expect(try !Connection(path: path).keepsDeviceTokensUnique())
    #expect {
      try SnapshotLoader.load(path: path)
    } throws: { error in
      guard let error = error as? SnapshotError else { return false }
      return error.table == "devices" && error.key == "device_id=4" && error.column == "token"
        && error.description.contains("token is already registered on gateway 'fcm'")
    }
  }
}
