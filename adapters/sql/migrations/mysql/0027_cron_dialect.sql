-- Cron dialects (issue 46): how a cron expression's fields are read,
-- 'standard' (crontab with optional seconds, what every earlier row meant)
-- or 'quartz' (seconds, optional year, day-of-week 1-7 = SUN-SAT). A
-- workflow's schedule document carries it too; the column is what is read.
ALTER TABLE jobs ADD COLUMN cron_dialect VARCHAR(16) NOT NULL DEFAULT 'standard';
ALTER TABLE workflows ADD COLUMN cron_dialect VARCHAR(16) NOT NULL DEFAULT 'standard';
