-- Issue 34, the rest: pause/resume and PATCH of a workflow, and a callback
-- per run end. `workflows.version` moves with each caller's change (PATCH
-- checks it, as for jobs); `definition_version` with each new graph, and a
-- run records the one it started with (`workflow_runs.definition_version`):
-- the graphs replaced by a PATCH stay in `workflow_definitions` for the runs
-- still following them. `workflows.callback_url` receives a run-end event.
-- Such a callback reports a run, not an execution: the outbox's
-- `execution_id` and `job_id` may be NULL, and `workflow_run_id` names the
-- run (exactly one of `execution_id` and `workflow_run_id` is set).
ALTER TABLE workflows
    ADD COLUMN callback_url VARCHAR(2048) COLLATE "C" NULL,
    ADD COLUMN version BIGINT NOT NULL DEFAULT 1,
    ADD COLUMN definition_version BIGINT NOT NULL DEFAULT 1;
ALTER TABLE workflow_runs
    ADD COLUMN definition_version BIGINT NOT NULL DEFAULT 1;
CREATE TABLE workflow_definitions (
    workflow_id VARCHAR(36) COLLATE "C" NOT NULL,
    version     BIGINT      NOT NULL,
    definition  JSONB       NOT NULL,
    node_jobs   JSONB       NOT NULL,
    created_at  TIMESTAMPTZ NOT NULL,
    CONSTRAINT pk_workflow_definitions PRIMARY KEY (workflow_id, version)
);
ALTER TABLE callbacks
    ALTER COLUMN execution_id DROP NOT NULL,
    ALTER COLUMN job_id DROP NOT NULL,
    ADD COLUMN workflow_run_id VARCHAR(36) COLLATE "C" NULL;
