import FanoutModel
import FanoutSQLite
import FanoutSnapshot

/// The tables that several scenarios of a sweep are forecast to write
/// (`ScenarioCopy.tablesWritten`), copied from the source once into a
/// private folder: each of those scenarios' overlays starts as a copy of
/// this file instead of copying the tables itself. At 1M users three
/// quiet-hours variants copied the users table three times, 0.2 s of
/// SQLite work each, where copying the file takes 0.03 s.
///
/// Made in the background from the moment it is created; a scenario that
/// asks for it first waits for it. A table the overlay would not copy
/// (`OverlayTables`) leaves no template: each scenario then copies its
/// tables itself, as a single `fanout whatif` does.
final class OverlayTemplate: Sendable {
  let tables: Set<String>
  private let made: Pending<(folder: ScenarioFolder, cleanup: Int)?>

  private init(tables: Set<String>, source: String) {
    self.tables = tables
    made = Pending { Self.make(tables, over: source) }
  }

  deinit {
    if let made = made.wait() {
      CleanupOnSignal.withdraw(made.cleanup)
      made.folder.remove()
    }
  }

  /// Per scenario (nil where no SQL is forecast to write a table), the
  /// template for the tables it writes, if another scenario writes the same.
  static func shared(by forecasts: [Set<String>?], source: String) -> [OverlayTemplate?] {
    var templates: [Set<String>: OverlayTemplate] = [:]
    for tables in forecasts {
      guard let tables, !tables.isEmpty, templates[tables] == nil,
        forecasts.count(where: { $0 == tables }) > 1
      else { continue }
      templates[tables] = OverlayTemplate(tables: tables, source: source)
    }
    return forecasts.map { $0.flatMap { templates[$0] } }
  }

  /// The template's file, once made; nil when it could not be.
  var file: String? { made.wait()?.folder.snapshotPath }

  /// Copies the template to `path` (a new file); false, with nothing left
  /// there, when there is no template.
  func copy(to path: String) -> Bool {
    guard let file, let template = try? Connection(path: file) else { return false }
    return template.copyMainFile(to: path)
  }

  private static func make(_ tables: Set<String>, over source: String)
    -> (folder: ScenarioFolder, cleanup: Int)?
  {
    guard
      let made = try? CleanupOnSignal.make(
        { () throws(SystemCallError) in try ScenarioFolder.make(in: ScenarioFolder.temporary) },
        undoneBy: { folder in folder.remove() })
    else { return nil }
    do throws(SQLiteError) {
      let overlay = try Connection(scratch: made.made.snapshotPath, base: source)
      if try OverlayTables.canOverlay(overlay), OverlayTables(overlay).copy(tables.sorted()) {
        return (made.made, made.cleanup)
      }
    } catch {}
    CleanupOnSignal.withdraw(made.cleanup)
    made.made.remove()
    return nil
  }
}
