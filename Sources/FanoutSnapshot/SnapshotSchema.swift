/// FanoutSnapshot owns reading a preferences snapshot (a SQLite file) into an
/// `Index`: the schema check, the validation of every row, and the build of
/// the columnar index. It is all or nothing: the first violation refuses the
/// whole snapshot with a `SnapshotError` naming table, row key and column.

/// The tables and columns the contract requires.
public enum SnapshotSchema {
  /// SQL that creates an empty snapshot (`fanout snapshot schema` prints it).
  public static let createSQL = """
    -- The Fanout snapshot schema (see docs/contract.md). Times are Unix epoch
    -- milliseconds; minutes are 0..1439 of the user's local day; NULL = inherit.
    CREATE TABLE settings (
      key   TEXT PRIMARY KEY,        -- 'schema_version' ('1'), 'default_chat_level', 'default_call_level'
      value TEXT NOT NULL
    );
    CREATE TABLE users (
      user_id      TEXT PRIMARY KEY,
      timezone     TEXT,             -- IANA name; NULL = 'UTC'
      chat_level   TEXT,             -- 'all' | 'mentions' | 'none' | NULL
      call_level   TEXT,             -- 'all' | 'none' | NULL
      snooze_start INTEGER,          -- NULL = from the beginning of time
      snooze_until INTEGER,          -- NULL = no snooze; window [snooze_start, snooze_until)
      dnd_start    INTEGER,          -- daily DND, local minutes; both NULL = none
      dnd_end      INTEGER,
      mention_notifications INTEGER, -- 0 | 1 | NULL
      pinned_notifications  INTEGER, -- 0 | 1 | NULL
      show_preview          INTEGER  -- 0 | 1 | NULL
    );
    CREATE TABLE dnd_weekly (
      user_id   TEXT NOT NULL REFERENCES users(user_id),
      weekday   INTEGER NOT NULL,    -- ISO 1 = Monday .. 7 = Sunday
      start_min INTEGER NOT NULL,
      end_min   INTEGER NOT NULL     -- [start_min, end_min); 1439 runs to midnight
    );
    CREATE TABLE channels (
      channel_id TEXT PRIMARY KEY,
      kind       TEXT NOT NULL       -- 'direct' | 'group' | 'broadcast'
    );
    CREATE TABLE members (
      channel_id TEXT NOT NULL REFERENCES channels(channel_id),
      user_id    TEXT NOT NULL REFERENCES users(user_id),
      PRIMARY KEY (channel_id, user_id)
    );
    CREATE TABLE scope_prefs (
      user_id TEXT NOT NULL REFERENCES users(user_id),
      scope   TEXT NOT NULL,
      chat_level TEXT, call_level TEXT, snooze_start INTEGER, snooze_until INTEGER,
      mention_notifications INTEGER, pinned_notifications INTEGER, show_preview INTEGER,
      PRIMARY KEY (user_id, scope)
    );
    CREATE TABLE channel_prefs (
      user_id    TEXT NOT NULL REFERENCES users(user_id),
      channel_id TEXT NOT NULL REFERENCES channels(channel_id),
      chat_level TEXT,               -- also 'default' (= NULL)
      call_level TEXT, snooze_start INTEGER, snooze_until INTEGER,
      mention_notifications INTEGER, pinned_notifications INTEGER, show_preview INTEGER,
      PRIMARY KEY (user_id, channel_id)
    );
    CREATE TABLE devices (
      device_id INTEGER PRIMARY KEY,
      user_id   TEXT NOT NULL REFERENCES users(user_id),
      gateway   TEXT NOT NULL,
      token     TEXT NOT NULL,
      UNIQUE (gateway, token)
    );
    CREATE TABLE categories (
      category           TEXT PRIMARY KEY,
      default_preference TEXT NOT NULL,
      mandatory          INTEGER NOT NULL DEFAULT 0
    );
    CREATE TABLE category_gateways (
      category  TEXT NOT NULL REFERENCES categories(category),
      gateway   TEXT NOT NULL,
      mandatory INTEGER NOT NULL DEFAULT 0,
      PRIMARY KEY (category, gateway)
    );
    CREATE TABLE category_prefs (
      user_id    TEXT NOT NULL REFERENCES users(user_id),
      category   TEXT NOT NULL REFERENCES categories(category),
      gateway    TEXT,
      preference TEXT NOT NULL
    );
    CREATE TABLE gateway_prefs (
      user_id    TEXT NOT NULL REFERENCES users(user_id),
      gateway    TEXT NOT NULL,
      restricted INTEGER NOT NULL,
      PRIMARY KEY (user_id, gateway)
    );

    -- Contract v2 (docs/contract.md, "Contract v2"): every addition is optional.
    -- Settings keys: 'default_chat_level.direct' / '.group' / '.broadcast',
    -- 'large_channel_members' with 'large_channel_level', 'mention_all_max_members',
    -- 'presence_action', 'presence_delay_ms', 'default_quiet_action',
    -- 'throttle_messages' with 'throttle_window_ms'.
    -- Contract v3 (docs/contract.md, "Contract v3"): 'notification_groups' ('off' | 'on'),
    -- and with it 'notification_group_size_max', 'notification_group_count_max'.
    ALTER TABLE users ADD COLUMN mention_all_notifications INTEGER;  -- 0 | 1 | NULL (0: @all is ordinary)
    ALTER TABLE users ADD COLUMN quiet_action TEXT;                  -- 'drop' | 'defer' | NULL
    ALTER TABLE scope_prefs ADD COLUMN mention_all_notifications INTEGER;
    ALTER TABLE channel_prefs ADD COLUMN mention_all_notifications INTEGER;
    ALTER TABLE channels ADD COLUMN member_count INTEGER;  -- members for the size rules; NULL = count rows
    CREATE TABLE user_mutes (        -- user_id never hears from muted_user_id
      user_id       TEXT NOT NULL REFERENCES users(user_id),
      muted_user_id TEXT NOT NULL REFERENCES users(user_id),
      PRIMARY KEY (user_id, muted_user_id)
    );
    CREATE TABLE thread_prefs (      -- a user's chat level in one thread of a channel
      user_id    TEXT NOT NULL REFERENCES users(user_id),
      channel_id TEXT NOT NULL REFERENCES channels(channel_id),
      thread_id  TEXT NOT NULL,
      chat_level TEXT NOT NULL,      -- 'all' | 'mentions' | 'none'
      PRIMARY KEY (user_id, channel_id, thread_id)
    );
    CREATE TABLE presence (          -- user_id was active on some client during [active_from, active_until)
      user_id      TEXT NOT NULL REFERENCES users(user_id),
      active_from  INTEGER NOT NULL,
      active_until INTEGER NOT NULL  -- active_from >= active_until: an empty window (accepted)
    );
    """

  /// `createSQL` without contract v2's additions: the v1 schema.
  public static var v1SQL: String {
    String(createSQL[..<createSQL.firstRange(of: "\n-- Contract v2")!.lowerBound])
  }

  /// The `CREATE TABLE` statement of one table, cut from `createSQL`.
  package static func createSQL(table name: String) -> String {
    let start = createSQL.firstRange(of: "CREATE TABLE \(name) (")!.lowerBound
    let end = createSQL[start...].firstRange(of: "\n);")!.upperBound  // comments hold ");"
    return String(createSQL[start..<end])
  }

  package struct Table {
    package let name: String
    let required: Bool
    /// The columns a present table must have, then those it may have
    /// (contract v2's additions: absent, they read as NULL in every row).
    let columns: [String]
    var optionalColumns: [String] = []

    package var allColumns: [String] { columns + optionalColumns }
  }

  /// The per-level preference columns shared by users, scope_prefs and channel_prefs,
  /// in the order `LevelRow.init` reads them.
  static let levelColumns = [
    "chat_level", "call_level", "snooze_start", "snooze_until", "mention_notifications",
    "pinned_notifications", "show_preview",
  ]

  package static let tables: [Table] = [
    Table(name: "settings", required: false, columns: ["key", "value"]),
    Table(
      name: "users", required: true,
      columns: ["user_id"] + levelColumns + ["timezone", "dnd_start", "dnd_end"],
      optionalColumns: ["mention_all_notifications", "quiet_action"]),
    Table(
      name: "dnd_weekly", required: false, columns: ["user_id", "weekday", "start_min", "end_min"]),
    Table(
      name: "channels", required: true, columns: ["channel_id", "kind"],
      optionalColumns: ["member_count"]),
    Table(name: "members", required: true, columns: ["channel_id", "user_id"]),
    Table(
      name: "scope_prefs", required: false, columns: ["user_id", "scope"] + levelColumns,
      optionalColumns: ["mention_all_notifications"]),
    Table(
      name: "channel_prefs", required: true, columns: ["user_id", "channel_id"] + levelColumns,
      optionalColumns: ["mention_all_notifications"]),
    Table(name: "devices", required: true, columns: ["device_id", "user_id", "gateway", "token"]),
    Table(
      name: "categories", required: false, columns: ["category", "default_preference", "mandatory"]),
    Table(
      name: "category_gateways", required: false, columns: ["category", "gateway", "mandatory"]),
    Table(
      name: "category_prefs", required: false,
      columns: ["user_id", "category", "gateway", "preference"]),
    Table(name: "gateway_prefs", required: false, columns: ["user_id", "gateway", "restricted"]),
    Table(name: "user_mutes", required: false, columns: ["user_id", "muted_user_id"]),
    Table(
      name: "thread_prefs", required: false,
      columns: ["user_id", "channel_id", "thread_id", "chat_level"]),
    Table(name: "presence", required: false, columns: ["user_id", "active_from", "active_until"]),
  ]

  package static func table(_ name: String) -> Table { tables.first { $0.name == name }! }

  /// Whether `name` may name a gateway (see the bytes version below).
  public static func isValidGatewayName(_ name: String) -> Bool {
    var name = name
    return name.withUTF8 { isValidGatewayName(UnsafeRawBufferPointer($0)) }
  }

  /// The longest gateway name: with `.ndjson.lz4`, a stream's segment
  /// number and the partial file's dots, a file name stays well within the
  /// 255 bytes file systems allow.
  public static let maxGatewayNameBytes = 64

  /// Gateway names become file names: `[a-z0-9][a-z0-9._-]*`, at most
  /// `maxGatewayNameBytes` long, minus the names of the other output files.
  static func isValidGatewayName(_ bytes: UnsafeRawBufferPointer) -> Bool {
    guard bytes.count <= maxGatewayNameBytes else { return false }
    guard let first = bytes.first, isLowerAlnum(first) else { return false }
    for c in bytes.dropFirst()
    where
      !(isLowerAlnum(c) || c == UInt8(ascii: ".") || c == UInt8(ascii: "_")
      || c == UInt8(ascii: "-"))
    {
      return false
    }
    // The names of the other output files, and of the stage's batch records
    // (`batches-NNNNNN.ndjson.lz4`, the `PREFIX:batches` stream).
    let reserved = ["decisions", "summary", "rejected", "batches"]
    return !reserved.contains { $0.utf8.elementsEqual(bytes) }
  }

  private static func isLowerAlnum(_ c: UInt8) -> Bool {
    (c >= UInt8(ascii: "a") && c <= UInt8(ascii: "z"))
      || (c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9"))
  }
}
