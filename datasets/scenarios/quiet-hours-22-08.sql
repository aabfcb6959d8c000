-- What if everyone who has not set quiet hours got 22:00-08:00 in their own
-- time zone? (Users with weekly windows keep them: weekly replaces daily.)
UPDATE users SET dnd_start = 22 * 60, dnd_end = 8 * 60 WHERE dnd_start IS NULL;
