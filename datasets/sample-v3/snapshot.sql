-- Contract v3 sample: notification groups, badges and reads (SPEC section 6).
-- ana reads the team channel on her laptop a minute after a message whose
-- phone push presence delayed by two minutes: the push is cancelled. Groups
-- keep at most 2 visible notifications, and at most 2 groups are shown.
-- Built like the other samples:
-- `fanout snapshot schema | cat - snapshot.sql | sqlite3 snapshot.sqlite`.
-- Times: 2026-03-09 (a Monday), 09:00 UTC = 1773046800000.

INSERT INTO settings VALUES ('schema_version', '1'),
  ('notification_groups', 'on'), ('notification_group_size_max', '2'),
  ('notification_group_count_max', '2'),
  ('presence_action', 'delay'), ('presence_delay_ms', '120000');

INSERT INTO users (user_id, timezone) VALUES ('ana', 'UTC'), ('bo', 'UTC'), ('cy', 'Europe/Berlin');

INSERT INTO channels (channel_id, kind) VALUES
  ('team', 'group'), ('ops', 'group'), ('dm:ana-bo', 'direct');
INSERT INTO members VALUES ('team', 'ana'), ('team', 'bo'), ('team', 'cy'),
  ('ops', 'ana'), ('ops', 'cy'), ('dm:ana-bo', 'ana'), ('dm:ana-bo', 'bo');

INSERT INTO devices VALUES (1, 'ana', 'apns', 'ana-phone'), (2, 'ana', 'webpush', 'ana-laptop'),
  (3, 'bo', 'fcm', 'bo-phone'), (4, 'cy', 'apns', 'cy-phone');

-- ana is active on her laptop from 09:00 to 09:05.
INSERT INTO presence VALUES ('ana', 1773046800000, 1773047100000);
