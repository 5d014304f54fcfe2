-- The dashboard (issue 16). Pausing can carry a reason, shown on the job
-- while it is paused (cleared by resume).
ALTER TABLE jobs ADD COLUMN pause_reason VARCHAR(500) COLLATE "C" NULL;

-- The dashboard lists a tenant's executions across jobs, newest trigger
-- first, and counts what was due in the last hour: both read this index
-- instead of scanning every tenant's executions.
CREATE INDEX idx_executions_tenant_scheduled ON executions (tenant, scheduled_at, id);
