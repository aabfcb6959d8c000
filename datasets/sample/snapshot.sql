-- Sample preferences: a small team chat that exercises every rule.
-- Built into snapshot.sqlite by `make demo`: `fanout snapshot schema | cat - snapshot.sql | sqlite3 snapshot.sqlite`.
-- Times: 2026-03-08 is the US daylight-saving day (New York 02:00 EST -> 03:00 EDT = 07:00 UTC).

INSERT INTO settings VALUES ('schema_version', '1'), ('default_chat_level', 'all'),
  ('default_call_level', 'all'), ('motd', 'unknown keys are ignored');

--        user_id   timezone              chat        call    snooze_start   snooze_until   dnd_start dnd_end mention pinned preview
INSERT INTO users (user_id, timezone, chat_level, call_level, snooze_start, snooze_until,
    dnd_start, dnd_end, mention_notifications, pinned_notifications, show_preview) VALUES
  ('alice',  NULL,                  NULL,       NULL,   NULL,          NULL,          NULL, NULL, NULL, NULL, NULL),
  ('bob',    'Asia/Shanghai',       NULL,       NULL,   NULL,          NULL,          1320, 420,  NULL, NULL, NULL), -- 22:00-07:00
  ('carol',  'America/New_York',    'mentions', NULL,   NULL,          NULL,          30,   200,  NULL, NULL, 0),    -- 00:30-03:20
  ('dave',   'Europe/Berlin',       NULL,       NULL,   NULL,          NULL,          720,  780,  NULL, NULL, NULL), -- replaced by weekly
  ('erin',   'UTC',                 NULL,       NULL,   1772951400000, 1772955000000, NULL, NULL, NULL, NULL, NULL), -- 06:30-07:30Z
  ('frank',  'Europe/London',       'none',     'all',  NULL,          NULL,          NULL, NULL, NULL, NULL, NULL),
  ('grace',  NULL,                  NULL,       NULL,   NULL,          NULL,          NULL, NULL, NULL, NULL, NULL), -- no devices
  ('heidi',  'Europe/Paris',        NULL,       NULL,   NULL,          NULL,          NULL, NULL, NULL, NULL, NULL),
  ('ivan',   'America/Los_Angeles', NULL,       NULL,   NULL,          NULL,          NULL, NULL, 0,    NULL, NULL),
  ('judy',   'Asia/Tokyo',          'mentions', NULL,   NULL,          NULL,          NULL, NULL, NULL, 0,    NULL),
  ('mallory','America/Sao_Paulo',   NULL,       NULL,   NULL,          NULL,          NULL, NULL, NULL, NULL, NULL),
  ('oscar',  'Africa/Nairobi',      NULL,       NULL,   NULL,          NULL,          600,  600,  NULL, NULL, NULL), -- all day
  ('peggy',  'Asia/Kolkata',        NULL,       NULL,   NULL,          NULL,          1380, 1439, NULL, NULL, NULL), -- 23:00-midnight
  ('trent',  'Europe/Madrid',       NULL,       NULL,   NULL,          NULL,          NULL, NULL, NULL, NULL, NULL),
  ('victor', 'America/Chicago',     NULL,       'none', NULL,          NULL,          NULL, NULL, NULL, NULL, NULL),
  ('walter', 'Australia/Sydney',    NULL,       NULL,   NULL,          NULL,          NULL, NULL, NULL, NULL, NULL);

INSERT INTO dnd_weekly VALUES
  ('dave', 1, 540, 1020),    -- Monday 09:00-17:00 Berlin
  ('dave', 3, 540, 1020),    -- Wednesday
  ('walter', 7, 0, 1439);    -- all Sunday in Sydney (1439 runs to midnight)

INSERT INTO channels (channel_id, kind) VALUES
  ('dm:alice-bob', 'direct'), ('messaging:general', 'group'),
  ('news:announcements', 'broadcast'), ('team:eng', 'group');

INSERT INTO members VALUES
  ('dm:alice-bob', 'alice'), ('dm:alice-bob', 'bob'),
  ('team:eng', 'alice'), ('team:eng', 'carol'), ('team:eng', 'dave'), ('team:eng', 'ivan'),
  ('team:eng', 'judy'), ('team:eng', 'trent');
INSERT INTO members SELECT 'messaging:general', user_id FROM users;
INSERT INTO members SELECT 'news:announcements', user_id FROM users;

INSERT INTO scope_prefs (user_id, scope, chat_level, show_preview) VALUES
  ('mallory', 'group', 'none', NULL),
  ('mallory', 'broadcast', 'mentions', 0),
  ('alice', 'broadcast', NULL, 0);

INSERT INTO channel_prefs (user_id, channel_id, chat_level, call_level, snooze_start, snooze_until, show_preview) VALUES
  ('carol', 'team:eng', 'all', NULL, NULL, NULL, NULL),               -- everything in her team
  ('ivan', 'team:eng', 'mentions', NULL, NULL, NULL, NULL),
  ('trent', 'messaging:general', NULL, NULL, NULL, 1772985600000, NULL), -- snoozed until 16:00Z
  ('alice', 'news:announcements', 'default', NULL, NULL, NULL, 1),      -- 'default' inherits; preview back on
  ('bob', 'dm:alice-bob', NULL, 'none', NULL, NULL, NULL),
  ('grace', 'team:eng', 'none', NULL, NULL, NULL, NULL);                -- not a member: no effect

INSERT INTO devices VALUES
  (10, 'alice', 'apns', 'apns-alice-phone'),
  (11, 'alice', 'fcm', 'fcm-alice-tablet'),
  (20, 'bob', 'fcm', 'fcm-bob'),
  (30, 'carol', 'webpush', 'https://push.example/carol?k="1"'),
  (40, 'dave', 'apns', 'apns-dave'),
  (51, 'erin', 'apns', 'apns-erin'),
  (50, 'erin', 'email', 'erin@example.com'),
  (60, 'frank', 'fcm', 'fcm-frank'),
  (80, 'heidi', 'email', 'heidi@example.com'),
  (81, 'heidi', 'apns', 'apns-heidi'),
  (90, 'ivan', 'apns', 'apns-ivan'),
  (100, 'judy', 'fcm', 'fcm-judy'),
  (110, 'mallory', 'apns', 'apns-mallory'),
  (120, 'oscar', 'fcm', 'fcm-oscar'),
  (130, 'peggy', 'apns', 'apns-peggy'),
  (140, 'trent', 'webpush', 'https://push.example/trent'),
  (150, 'victor', 'apns', 'apns-victor'),
  (160, 'walter', 'fcm', 'fcm-walter');

INSERT INTO categories VALUES
  ('marketing', 'opt_in', 0),
  ('newsletter', 'opt_out', 0),
  ('security', 'opt_in', 1);

INSERT INTO category_gateways VALUES ('security', 'email', 1), ('security', 'apns', 0);

INSERT INTO category_prefs VALUES
  ('alice', 'newsletter', NULL, 'opt_in'),    -- opts in to an opt-out category
  ('bob', 'newsletter', 'fcm', 'opt_in'),     -- a gateway opt-in does not lift the category default
  ('heidi', 'security', NULL, 'opt_out'),     -- mandatory: ignored
  ('heidi', 'security', 'apns', 'opt_out'),   -- but a gateway opt-out still blocks
  ('heidi', 'marketing', NULL, 'opt_out'),
  ('erin', 'marketing', 'apns', 'opt_out');

INSERT INTO gateway_prefs VALUES
  ('heidi', 'email', 1),                      -- email only for categories where email is mandatory
  ('erin', 'apns', 0);
