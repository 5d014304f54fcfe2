-- Issue 36: partitioned dispatch. Every job belongs to one of a fixed number
-- of partitions, FNV-1a of its id modulo that number (`partition_no`,
-- `kairos_core::partition::of`), recorded here once: rows are hashed with
-- it, so it never changes for a database. Rows that exist before this
-- migration carry -1 until the store fills them in right after it
-- (`SqlStore::migrate`). In partitioned mode each dispatcher scans only the
-- partitions it holds leases on, through (partition_no, next_trigger_at),
-- and its claims are fenced per partition: rows `<lease>/p<n>` of
-- `leader_fences`, beside the leader's own row.
CREATE TABLE dispatch_partitions (
    id         BIGINT NOT NULL,
    partitions BIGINT NOT NULL,
    PRIMARY KEY (id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
INSERT INTO dispatch_partitions (id, partitions) VALUES (1, 256);
ALTER TABLE jobs
    ADD COLUMN partition_no BIGINT NOT NULL DEFAULT -1,
    ADD KEY idx_jobs_partition_next (partition_no, next_trigger_at);
