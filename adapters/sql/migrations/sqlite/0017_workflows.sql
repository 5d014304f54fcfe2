-- Issue 34: workflows. `workflows` holds a DAG of job templates (its
-- definition as a JSON document) and the internal job backing each node
-- (`node_jobs`, node id -> job id): a node's executions are ordinary
-- executions of that job, so retries, timeouts, logs and recovery are the
-- ones every job has. Those jobs carry `jobs.workflow_id`, have no trigger
-- of their own (the scan never finds them) and are left out of job listings.
-- `workflow_runs` is one run (unique per workflow and trigger time, which is
-- also the `scheduled_at` of every node execution of the run, so the
-- executions key (job_id, scheduled_at, shard_index) allows one execution
-- per node per run); `workflow_run_nodes` one node of a run, with its
-- execution once it became due. `executions.parent_outputs` is what a node's
-- dispatch carries of its parents' outputs. A workflow with a schedule
-- (`schedule`, as the API accepted it) has its next trigger in
-- `next_trigger_at`: the leading dispatcher starts a run for each, read
-- through (status, next_trigger_at).
ALTER TABLE jobs ADD COLUMN workflow_id TEXT NULL;
ALTER TABLE jobs ADD COLUMN has_followups INTEGER NOT NULL DEFAULT 0;
ALTER TABLE executions ADD COLUMN parent_outputs TEXT NULL;
CREATE TABLE workflows (
    id                TEXT    NOT NULL PRIMARY KEY,
    tenant            TEXT    NOT NULL,
    name              TEXT    NOT NULL,
    definition        TEXT    NOT NULL,
    node_jobs         TEXT    NOT NULL,
    schedule          TEXT    NULL,
    next_trigger_at   INTEGER NULL,
    status            TEXT    NOT NULL,
    client_request_id TEXT    NULL,
    request_hash      TEXT    NULL,
    created_at        INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL
) STRICT;
CREATE UNIQUE INDEX uq_workflows_tenant_request ON workflows (tenant, client_request_id);
CREATE INDEX idx_workflows_tenant_created ON workflows (tenant, created_at, id);
CREATE INDEX idx_workflows_status_next ON workflows (status, next_trigger_at);
CREATE TABLE workflow_runs (
    id           TEXT    NOT NULL PRIMARY KEY,
    workflow_id  TEXT    NOT NULL,
    tenant       TEXT    NOT NULL,
    status       TEXT    NOT NULL,
    scheduled_at INTEGER NOT NULL,
    created_at   INTEGER NOT NULL,
    finished_at  INTEGER NULL,
    updated_at   INTEGER NOT NULL
) STRICT;
CREATE UNIQUE INDEX uq_workflow_runs_trigger ON workflow_runs (workflow_id, scheduled_at);
CREATE TABLE workflow_run_nodes (
    run_id       TEXT    NOT NULL,
    node_id      TEXT    NOT NULL,
    position     INTEGER NOT NULL,
    status       TEXT    NOT NULL,
    execution_id TEXT    NULL,
    decided_at   INTEGER NULL,
    updated_at   INTEGER NOT NULL,
    PRIMARY KEY (run_id, node_id)
) STRICT;
CREATE UNIQUE INDEX uq_workflow_run_nodes_execution ON workflow_run_nodes (execution_id);
-- Child jobs (issue 34, part 3): `job_followups` names the jobs a job's
-- execution triggers when it ends (`outcome`: success or failure);
-- `jobs.has_followups` lets the results transaction skip the lookup for
-- every other job.
CREATE TABLE job_followups (
    job_id     TEXT    NOT NULL,
    outcome    TEXT    NOT NULL,
    child_id   TEXT    NOT NULL,
    tenant     TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (job_id, outcome, child_id)
) STRICT;
