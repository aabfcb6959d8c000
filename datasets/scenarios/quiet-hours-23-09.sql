-- What if everyone who has not set quiet hours got 23:00-09:00 in their own
-- time zone? (Users with weekly windows keep them: weekly replaces daily.)
UPDATE users SET dnd_start = 23 * 60, dnd_end = 9 * 60 WHERE dnd_start IS NULL;
