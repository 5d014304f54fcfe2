-- Mirrors migrations/mysql/0002_schedules.sql: fixed rate (every_ms) and
-- fixed delay (delay_ms) schedules, a [start_at, end_at] window, the misfire
-- and overlap policies of recurring jobs, when a stop was requested of an
-- execution, and executions found per job and state.

ALTER TABLE jobs
    ADD COLUMN every_ms       BIGINT      NULL,
    ADD COLUMN delay_ms       BIGINT      NULL,
    ADD COLUMN start_at       BIGINT      NULL,
    ADD COLUMN end_at         BIGINT      NULL,
    ADD COLUMN misfire_policy VARCHAR(16) COLLATE "C" NOT NULL DEFAULT 'fireOnce',
    ADD COLUMN overlap_policy VARCHAR(16) COLLATE "C" NOT NULL DEFAULT 'allow';

ALTER TABLE executions
    ADD COLUMN stop_requested_at BIGINT NULL;
CREATE INDEX idx_executions_job_status ON executions (job_id, status);
CREATE INDEX idx_executions_stop_requested ON executions (stop_requested_at);
