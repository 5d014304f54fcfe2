-- Issue #43: claims and results wrote index entries nothing needed. The
-- partitions' (partition_no, next_trigger_at) index moved with every claim
-- (a one-shot's next trigger becomes NULL), and since partitions are hashes
-- of ids, the 500 jobs of one claim sat on as many pages of it. Partitioned
-- scans read `idx_jobs_status_next` in due order and skip other partitions'
-- rows instead; the index on partition_no alone keeps the fill of
-- pre-partition rows an indexed read and never moves.
DROP INDEX idx_jobs_partition_next;
CREATE INDEX idx_jobs_partition ON jobs (partition_no);
-- The ranked and the immediate lane's scans read only jobs with a next
-- trigger (`next_trigger_at <= …`), and the lane's only lane 1 (written as
-- a literal by the store, so the planner matches it): partial indexes hold
-- just those rows, so a finished job's status change leaves them alone, and
-- a scheduled job's claims and results never touch the lane's.
DROP INDEX idx_jobs_priority_due;
CREATE INDEX idx_jobs_priority_due ON jobs (status, priority, next_trigger_at)
    WHERE next_trigger_at IS NOT NULL;
DROP INDEX idx_jobs_lane_due;
CREATE INDEX idx_jobs_lane_due ON jobs (lane, status, next_trigger_at)
    WHERE lane = 1 AND next_trigger_at IS NOT NULL;
