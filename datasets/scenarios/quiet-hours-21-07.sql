-- What if everyone who has not set quiet hours got 21:00-07:00 in their own
-- time zone? (Users with weekly windows keep them: weekly replaces daily.)
UPDATE users SET dnd_start = 21 * 60, dnd_end = 7 * 60 WHERE dnd_start IS NULL;
