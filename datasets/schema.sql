-- The Fanout snapshot schema (see README "Snapshot"). Times are Unix epoch
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
