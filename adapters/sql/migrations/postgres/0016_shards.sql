-- Issue 33, part 1: broadcast and sharded jobs. A job says how many
-- executions each trigger makes (`execution_mode`: single, broadcast or
-- sharded, with `shard_count` for sharded); each execution records its part
-- of the trigger (`shard_index` of `shard_count`, 0 of 1 for single jobs).
-- The trigger key becomes (job_id, scheduled_at, shard_index): every shard
-- of a trigger is still created exactly once. The new key is added before
-- the old one goes, so the foreign key on job_id always has an index.
ALTER TABLE jobs
    ADD COLUMN execution_mode VARCHAR(16) COLLATE "C" NOT NULL DEFAULT 'single',
    ADD COLUMN shard_count BIGINT NULL;
ALTER TABLE executions
    ADD COLUMN shard_index BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN shard_count BIGINT NOT NULL DEFAULT 1,
    ADD CONSTRAINT uq_executions_shard UNIQUE (job_id, scheduled_at, shard_index);
ALTER TABLE executions DROP CONSTRAINT uq_executions_trigger;
