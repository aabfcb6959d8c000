import FanoutSQLite
import FanoutTestSupport
import Testing

/// A failed statement is named in the error, bounded: a script that fails —
/// the whole schema on a full disk, a long scenario — is the statement.
@Suite("SQLite errors")
struct SQLiteErrorTests {
  @Test("a long failing script is echoed bounded, its control characters shown")
  func longScriptBounded() throws {
    let folder = makeTemporaryDirectory()
    let connection = try Connection(scratch: folder + "/scratch.sqlite")
    let script =
      "-- a scenario\nSELECT * FROM no_such_table;\n" + String(repeating: "-- pad\n", count: 20_000)
    let error = #expect(throws: SQLiteError.self) { try connection.execute(script) }
    let text = try #require(error).description
    #expect(
      text.hasPrefix("SQLite error 1: no such table: no_such_table (in '-- a scenario\\u{A}SELECT"))
    #expect(text.hasSuffix("… (\(script.utf8.count) bytes)')"))
    #expect(text.utf8.count < 400)
  }
}
