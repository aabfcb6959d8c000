import CSQLite
import FanoutSQLite

/// The floor for loading: reads the columns the loader reads, in the same
/// order, touching every value, and builds nothing. Benchmarks compare the
/// load against it.
public enum RawScan {
  /// Scans every table of the snapshot; returns the number of values read.
  public static func run(path: String) throws(SnapshotError) -> Int {
    let connection: Connection
    do { connection = try Connection(path: path) } catch {
      throw SnapshotError(reason: "cannot open '\(path)': \(error.message)", sqlite: error)
    }
    // Users and channels in rowid order, as the loader reads them when their
    // ids were written in order (the generator's files are).
    let orders = [
      "members": "channel_id COLLATE BINARY, user_id COLLATE BINARY", "devices": "device_id",
    ]
    // The tables present, as the loader finds them: optional ones may be absent.
    var present: Set<String> = []
    do {
      let list = try connection.prepare(
        "SELECT lower(name) FROM sqlite_master WHERE type IN ('table', 'view')")
      while try list.step() { present.insert(list.text(0)) }
    } catch {
      throw SnapshotError(reason: "not a readable SQLite database: \(error.message)", sqlite: error)
    }
    var values = 0
    var bytes = 0
    for table in SnapshotSchema.tables where table.required || present.contains(table.name) {
      let columns = table.columns.map { "\"\($0)\"" }.joined(separator: ", ")
      let order = orders[table.name].map { " ORDER BY \($0)" } ?? ""
      do {
        let statement = try connection.prepare("SELECT \(columns) FROM \"\(table.name)\"\(order)")
        while try statement.step() {
          for c in 0..<Int32(table.columns.count) {
            let value = statement.value(c)  // as the loader reads each value: one lookup
            if value.type == SQLITE_TEXT {
              bytes &+= value.textBytes.count
            } else {
              bytes &+= Int(value.int64)
            }
            values += 1
          }
        }
      } catch {
        if table.required {
          throw SnapshotError(table: table.name, reason: error.message, sqlite: error)
        }
      }
    }
    return values + (bytes & 1)
  }
}
