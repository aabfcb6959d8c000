-- What if ordinary messages were throttled to 3 pushes per user and
-- channel per 10 minutes? (Contract v2 rule 8: mentions, pinned messages
-- and calls always go through and do not count; earlier lines count in
-- input order.)
INSERT OR REPLACE INTO settings VALUES ('throttle_messages', '3'), ('throttle_window_ms', '600000');
