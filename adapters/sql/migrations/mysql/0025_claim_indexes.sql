-- Issue #43: claims and results wrote index entries nothing needed. The
-- partitions' (partition_no, next_trigger_at) index moved with every claim
-- (a one-shot's next trigger becomes NULL), and since partitions are hashes
-- of ids, the 500 jobs of one claim sat on as many pages of it. Partitioned
-- scans read `idx_jobs_status_next` in due order and skip other partitions'
-- rows instead (a few times the rows they return, in a backlog); the index
-- on partition_no alone keeps the fill of pre-partition rows an indexed read
-- and never moves, since a job's partition never changes.
ALTER TABLE jobs
    DROP KEY idx_jobs_partition_next,
    ADD KEY idx_jobs_partition (partition_no);
