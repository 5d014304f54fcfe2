-- Issue 34, the rest: pause/resume and PATCH of a workflow, and a callback
-- per run end. `workflows.version` moves with each caller's change (PATCH
-- checks it, as for jobs); `definition_version` with each new graph, and a
-- run records the one it started with (`workflow_runs.definition_version`):
-- the graphs replaced by a PATCH stay in `workflow_definitions` for the runs
-- still following them. `workflows.callback_url` receives a run-end event.
-- Such a callback reports a run, not an execution: the outbox's
-- `execution_id` and `job_id` may be NULL, and `workflow_run_id` names the
-- run (exactly one of `execution_id` and `workflow_run_id` is set).
ALTER TABLE workflows ADD COLUMN callback_url TEXT NULL;
ALTER TABLE workflows ADD COLUMN version INTEGER NOT NULL DEFAULT 1;
ALTER TABLE workflows ADD COLUMN definition_version INTEGER NOT NULL DEFAULT 1;
ALTER TABLE workflow_runs ADD COLUMN definition_version INTEGER NOT NULL DEFAULT 1;
CREATE TABLE workflow_definitions (
    workflow_id TEXT    NOT NULL,
    version     INTEGER NOT NULL,
    definition  TEXT    NOT NULL,
    node_jobs   TEXT    NOT NULL,
    created_at  INTEGER NOT NULL,
    PRIMARY KEY (workflow_id, version)
) STRICT;
-- SQLite cannot drop a NOT NULL: the outbox is rebuilt under the same name.
-- The migration runs in a transaction, where foreign keys cannot be turned
-- off; deferring them lets `callbacks` be dropped while `callback_attempts`
-- rows point at it, and the rows copied back satisfy them again before the
-- commit checks.
PRAGMA defer_foreign_keys = ON;
CREATE TABLE callbacks_0019 AS SELECT * FROM callbacks;
DROP TABLE callbacks;
CREATE TABLE callbacks (
    id              TEXT    NOT NULL PRIMARY KEY,
    execution_id    TEXT    NULL REFERENCES executions (id),
    job_id          TEXT    NULL,
    workflow_run_id TEXT    NULL,
    tenant          TEXT    NOT NULL,
    url             TEXT    NOT NULL,
    payload         TEXT    NOT NULL,
    state           TEXT    NOT NULL,
    attempts        INTEGER NOT NULL,
    next_attempt_at INTEGER NOT NULL,
    last_error      TEXT    NULL,
    lease_owner     TEXT    NULL,
    lease_token     TEXT    NULL,
    lease_until     INTEGER NULL,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL
) STRICT;
INSERT INTO callbacks (id, execution_id, job_id, tenant, url, payload, state, attempts,
    next_attempt_at, last_error, lease_owner, lease_token, lease_until, created_at, updated_at)
SELECT id, execution_id, job_id, tenant, url, payload, state, attempts,
    next_attempt_at, last_error, lease_owner, lease_token, lease_until, created_at, updated_at
FROM callbacks_0019;
DROP TABLE callbacks_0019;
CREATE INDEX idx_callbacks_state_next ON callbacks (state, next_attempt_at);
CREATE INDEX idx_callbacks_execution ON callbacks (execution_id, created_at);
