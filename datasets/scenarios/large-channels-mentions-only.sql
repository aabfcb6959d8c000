-- What if channels of more than 100 members were mentions-only for everyone
-- who did not choose a level themselves (Rocket.Chat's rule)? The contract v2
-- way of asking big-groups-mentions-only.sql, for every kind of channel.
INSERT OR REPLACE INTO settings VALUES ('large_channel_members', '100'), ('large_channel_level', 'mentions');
