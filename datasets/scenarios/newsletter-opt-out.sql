-- How many pushes does opting everyone out of the 'newsletter' category remove?
DELETE FROM category_prefs WHERE category = 'newsletter' AND gateway IS NULL;
INSERT INTO category_prefs (user_id, category, gateway, preference)
  SELECT user_id, 'newsletter', NULL, 'opt_out' FROM users;
