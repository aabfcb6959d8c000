-- What if quiet hours and snoozes deferred notifications to their end
-- instead of dropping them? (Contract v2: users who chose 'drop' keep it;
-- calls are never deferred; a pair is dropped if nothing frees it within 7 days.)
INSERT OR REPLACE INTO settings VALUES ('default_quiet_action', 'defer');
