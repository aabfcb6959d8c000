import FanoutTestSupport
import Foundation
import Testing

@testable import FanoutSnapshot

/// Fanout reads UTF-8 snapshots: a database storing its text as UTF-16
/// orders ids by their UTF-16 code units, not by the bytes of their UTF-8,
/// which the loader's ordered reads rely on. Such a snapshot is refused with
/// the remedy named, and the remedy gives the index the UTF-8 twin gives.
@Suite("Snapshot text encodings")
struct TextEncodingTests {
  /// Ids whose UTF-8 and UTF-16 orders differ ('ｕ' U+FF55 sorts before
  /// '𝓊' U+1D4CA in UTF-8, after it in UTF-16: a surrogate pair), members of each.
  private static let rows = """
    INSERT INTO users (user_id, timezone) VALUES
      ('u1', 'Asia/Shanghai'), ('ｕ2', NULL), ('𝓊3', 'UTC'), ('ü4', NULL);
    INSERT INTO channels VALUES ('c1', 'group'), ('ｃ2', 'direct'), ('𝒸3', 'group');
    INSERT INTO members VALUES
      ('c1', 'u1'), ('c1', 'ｕ2'), ('c1', '𝓊3'), ('c1', 'ü4'), ('ｃ2', 'u1'), ('ｃ2', 'ｕ2'),
      ('𝒸3', '𝓊3'), ('𝒸3', 'ü4');
    INSERT INTO devices VALUES (1, 'u1', 'apns', 'tök1'), (2, 'ｕ2', 'fcm', 't2'), (3, '𝓊3', 'fcm', 't3');
    INSERT INTO channel_prefs (user_id, channel_id, chat_level) VALUES ('ｕ2', 'c1', 'mentions');

    """

  private func make(encoding: String) throws -> String {
    let path = SQLiteFixture.make(
      SQLiteFixture.header + Self.rows,
      schema: "PRAGMA encoding = '\(encoding)';\n" + SQLiteFixture.schema)
    // The header's text encoding (offset 56: 1 UTF-8, 2 UTF-16le, 3 UTF-16be) is the one asked for.
    let header = try #require(FileManager.default.contents(atPath: path)).prefix(60)
    #expect(Int(header[59]) == ["UTF-8": 1, "UTF-16le": 2, "UTF-16be": 3][encoding])
    return path
  }

  /// The compiled bytes of the snapshot at `path` (equal bytes, equal indexes).
  private func compiled(_ path: String) throws -> Data {
    let snapshot = try SnapshotLoader.load(path: path)
    let out = makeTemporaryDirectory("fanout-encoding") + "/index.fanout-index"
    try CompiledSnapshot.write(snapshot, key: [1], to: out, mode: 0o600)
    return try #require(FileManager.default.contents(atPath: out))
  }

  @Test(
    "a UTF-16 snapshot is refused, naming its encoding and the remedy, which loads as UTF-8 does")
  func utf16() throws {
    let utf8 = try compiled(try make(encoding: "UTF-8"))
    for encoding in ["UTF-16le", "UTF-16be"] {
      let path = try make(encoding: encoding)
      #expect {
        try SnapshotLoader.load(path: path)
      } throws: { error in
        "\(error)".contains("text encoding \(encoding)") && "\(error)".contains(".dump")
      }
      let converted = makeTemporaryDirectory("fanout-encoding") + "/utf8.sqlite"
      let dump = runProcess("/usr/bin/sqlite3", [path, ".dump"])
      #expect(dump.status == 0)
      #expect(
        runProcess("/usr/bin/sqlite3", [converted], input: dump.stdout).status == 0)
      #expect(try compiled(converted) == utf8, "\(encoding)")
    }
  }
}
