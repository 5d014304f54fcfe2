-- Issue 33. `priority` (0-9, higher first) orders the due triggers of a
-- backlog: the ranked scan reads one priority at a time through
-- `idx_jobs_priority_due`, oldest due first. `lane` is 1 for a one-shot that
-- was due when it was created (someone is waiting for it): the leader claims
-- that lane in a loop of its own through `idx_jobs_lane_due`, so a cron flood
-- never stands in front of it. Existing jobs keep the main lane.
ALTER TABLE jobs
    ADD COLUMN priority BIGINT NOT NULL DEFAULT 5,
    ADD COLUMN lane BIGINT NOT NULL DEFAULT 0;
CREATE INDEX idx_jobs_priority_due ON jobs (status, priority, next_trigger_at);
CREATE INDEX idx_jobs_lane_due ON jobs (lane, status, next_trigger_at);
