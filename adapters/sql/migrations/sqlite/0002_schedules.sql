-- Mirrors migrations/mysql/0002_schedules.sql: fixed rate and fixed delay,
-- the [start_at, end_at] window, misfire and overlap policies, stop requests
-- on executions, and the (job_id, status) index.

ALTER TABLE jobs ADD COLUMN every_ms INTEGER NULL;
ALTER TABLE jobs ADD COLUMN delay_ms INTEGER NULL;
ALTER TABLE jobs ADD COLUMN start_at INTEGER NULL;
ALTER TABLE jobs ADD COLUMN end_at INTEGER NULL;
ALTER TABLE jobs ADD COLUMN misfire_policy TEXT NOT NULL DEFAULT 'fireOnce';
ALTER TABLE jobs ADD COLUMN overlap_policy TEXT NOT NULL DEFAULT 'allow';

ALTER TABLE executions ADD COLUMN stop_requested_at INTEGER NULL;
CREATE INDEX idx_executions_job_status ON executions (job_id, status);
CREATE INDEX idx_executions_stop_requested ON executions (stop_requested_at);
