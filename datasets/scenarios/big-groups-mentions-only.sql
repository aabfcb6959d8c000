-- What if group channels of more than 100 members defaulted to mentions-only?
-- "Defaulted": members who chose a level themselves (for the channel, for
-- groups, or for everything) keep it; everyone else gets 'mentions' there.
WITH big AS (SELECT channel_id FROM members GROUP BY channel_id HAVING count(*) > 100)
INSERT INTO channel_prefs (user_id, channel_id, chat_level)
  SELECT m.user_id, m.channel_id, 'mentions'
  FROM members m
  JOIN channels c ON c.channel_id = m.channel_id
  JOIN users u ON u.user_id = m.user_id
  WHERE c.kind = 'group' AND m.channel_id IN big AND u.chat_level IS NULL
    AND NOT EXISTS (SELECT 1 FROM scope_prefs s
                    WHERE s.user_id = m.user_id AND s.scope = 'group' AND s.chat_level IS NOT NULL)
  ON CONFLICT (user_id, channel_id) DO UPDATE SET chat_level = 'mentions'
    WHERE chat_level IS NULL OR chat_level = 'default';
