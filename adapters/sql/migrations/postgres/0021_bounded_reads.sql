-- Issue 43: every read bounded by what it returns. A job's executions,
-- newest trigger first (its page, its latest execution on every
-- `GET /openapi/jobs/{id}`), read this index from the job's newest entry:
-- since the trigger key gained `shard_index` no index ordered one job's
-- executions by (scheduled_at, id), and the planners walked the tenant's
-- whole history through `idx_executions_tenant_scheduled` instead.
CREATE INDEX idx_executions_job_scheduled ON executions (job_id, scheduled_at, id);
