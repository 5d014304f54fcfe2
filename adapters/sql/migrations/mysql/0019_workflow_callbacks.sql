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
    ADD COLUMN callback_url VARCHAR(2048) NULL,
    ADD COLUMN version BIGINT NOT NULL DEFAULT 1,
    ADD COLUMN definition_version BIGINT NOT NULL DEFAULT 1;
ALTER TABLE workflow_runs
    ADD COLUMN definition_version BIGINT NOT NULL DEFAULT 1;
CREATE TABLE workflow_definitions (
    workflow_id VARCHAR(36) NOT NULL,
    version     BIGINT      NOT NULL,
    definition  JSON        NOT NULL,
    node_jobs   JSON        NOT NULL,
    created_at  DATETIME(3) NOT NULL,
    PRIMARY KEY (workflow_id, version)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
ALTER TABLE callbacks
    MODIFY COLUMN execution_id VARCHAR(36) NULL,
    MODIFY COLUMN job_id VARCHAR(36) NULL,
    ADD COLUMN workflow_run_id VARCHAR(36) NULL;
