-- Schedules beyond one-shot and cron: fixed rate (every_ms) and fixed delay
-- (delay_ms, schedule_kind 'every' / 'delay'), a [start_at, end_at] window,
-- and the misfire and overlap policies of recurring jobs (stored with their
-- API names). Executions record when a stop was requested (cancel, or the
-- 'replace' overlap policy), and are found per job and state through a new
-- index (overlap checks, the end of a job after its last live execution).

ALTER TABLE jobs
    ADD COLUMN every_ms       BIGINT      NULL,
    ADD COLUMN delay_ms       BIGINT      NULL,
    ADD COLUMN start_at       BIGINT      NULL,
    ADD COLUMN end_at         BIGINT      NULL,
    ADD COLUMN misfire_policy VARCHAR(16) NOT NULL DEFAULT 'fireOnce',
    ADD COLUMN overlap_policy VARCHAR(16) NOT NULL DEFAULT 'allow';

ALTER TABLE executions
    ADD COLUMN stop_requested_at BIGINT NULL,
    ADD KEY idx_executions_job_status (job_id, status),
    ADD KEY idx_executions_stop_requested (stop_requested_at);
