-- Issue 45: retention of finished history. Each tenant may override the
-- deployment's retention periods (milliseconds; NULL: the deployment's),
-- and the purge picks rows through an index on their finished time per
-- tenant, oldest first, so a pass never scans a table: executions by
-- (tenant, finished_at), one-shot jobs by (tenant, status, updated_at), runs
-- by (tenant, finished_at), audit entries by (tenant, at). A run's callbacks
-- are found by their run, and a job named as another's follow-up (which is
-- never purged) by its id.
ALTER TABLE tenants
    ADD COLUMN retain_executions_ms BIGINT NULL,
    ADD COLUMN retain_jobs_ms BIGINT NULL,
    ADD COLUMN retain_workflow_runs_ms BIGINT NULL,
    ADD COLUMN retain_audit_ms BIGINT NULL;
ALTER TABLE executions ADD KEY idx_executions_tenant_finished (tenant, finished_at);
ALTER TABLE jobs ADD KEY idx_jobs_tenant_status_updated (tenant, status, updated_at);
ALTER TABLE workflow_runs ADD KEY idx_workflow_runs_tenant_finished (tenant, finished_at);
ALTER TABLE audit_log ADD KEY idx_audit_log_tenant_at (tenant, at);
ALTER TABLE callbacks ADD KEY idx_callbacks_workflow_run (workflow_run_id);
ALTER TABLE job_followups ADD KEY idx_job_followups_child (child_id);
