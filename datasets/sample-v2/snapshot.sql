-- Contract v2 sample: a small team chat that exercises section 5's rules —
-- silent sends, a muted sender, a thread level, presence, deferring quiet
-- hours, and the throttle (2 ordinary pushes per user and channel per 10
-- minutes). Built like the v1 sample:
-- `fanout snapshot schema | cat - snapshot.sql | sqlite3 snapshot.sqlite`.
-- Times: 2026-03-09 (a Monday), 09:00 UTC = 1773046800000.

INSERT INTO settings VALUES ('schema_version', '1'), ('presence_action', 'suppress'),
  ('throttle_messages', '2'), ('throttle_window_ms', '600000');

-- ana's quiet hours (UTC 08:00-09:30) are deferred to their end; bo's are dropped.
INSERT INTO users (user_id, timezone, dnd_start, dnd_end, quiet_action) VALUES
  ('ana', 'UTC',           480,  570,  'defer'),
  ('bo',  'UTC',           480,  570,  NULL),
  ('cy',  'Europe/Berlin', NULL, NULL, NULL),
  ('di',  'Asia/Tokyo',    NULL, NULL, NULL),
  ('ed',  NULL,            NULL, NULL, NULL);

INSERT INTO channels (channel_id, kind) VALUES ('team', 'group'), ('dm:cy-di', 'direct');
INSERT INTO members VALUES ('team', 'ana'), ('team', 'bo'), ('team', 'cy'), ('team', 'di'),
  ('team', 'ed'), ('dm:cy-di', 'cy'), ('dm:cy-di', 'di');
INSERT INTO devices VALUES (1, 'ana', 'apns', 'tok-ana'), (2, 'bo', 'fcm', 'tok-bo'),
  (3, 'cy', 'apns', 'tok-cy'), (4, 'di', 'fcm', 'tok-di'), (5, 'ed', 'webpush', 'tok-ed');

-- di muted ed; cy follows thread 'release' in team with everything else muted.
INSERT INTO user_mutes VALUES ('di', 'ed');
INSERT INTO channel_prefs (user_id, channel_id, chat_level) VALUES ('cy', 'team', 'none');
INSERT INTO thread_prefs VALUES ('cy', 'team', 'release', 'all');
-- ed is at a desk between 09:00 and 09:20 UTC.
INSERT INTO presence VALUES ('ed', 1773046800000, 1773048000000);
