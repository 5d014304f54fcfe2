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
ALTER TABLE jobs
    ADD COLUMN workflow_id VARCHAR(36) COLLATE "C" NULL,
    ADD COLUMN has_followups BIGINT NOT NULL DEFAULT 0;
ALTER TABLE executions
    ADD COLUMN parent_outputs JSONB NULL;
CREATE TABLE workflows (
    id                VARCHAR(36)  COLLATE "C" NOT NULL,
    tenant            VARCHAR(128) COLLATE "C" NOT NULL,
    name              VARCHAR(255) COLLATE "C" NOT NULL,
    definition        JSONB        NOT NULL,
    node_jobs         JSONB        NOT NULL,
    schedule          JSONB        NULL,
    next_trigger_at   TIMESTAMPTZ  NULL,
    status            VARCHAR(16)  COLLATE "C" NOT NULL,
    client_request_id VARCHAR(255) COLLATE "C" NULL,
    request_hash      VARCHAR(64)  COLLATE "C" NULL,
    created_at        TIMESTAMPTZ  NOT NULL,
    updated_at        TIMESTAMPTZ  NOT NULL,
    CONSTRAINT pk_workflows PRIMARY KEY (id),
    CONSTRAINT uq_workflows_tenant_request UNIQUE (tenant, client_request_id)
);
CREATE INDEX idx_workflows_tenant_created ON workflows (tenant, created_at, id);
CREATE INDEX idx_workflows_status_next ON workflows (status, next_trigger_at);
CREATE TABLE workflow_runs (
    id           VARCHAR(36)  COLLATE "C" NOT NULL,
    workflow_id  VARCHAR(36)  COLLATE "C" NOT NULL,
    tenant       VARCHAR(128) COLLATE "C" NOT NULL,
    status       VARCHAR(16)  COLLATE "C" NOT NULL,
    scheduled_at TIMESTAMPTZ  NOT NULL,
    created_at   TIMESTAMPTZ  NOT NULL,
    finished_at  TIMESTAMPTZ  NULL,
    updated_at   TIMESTAMPTZ  NOT NULL,
    CONSTRAINT pk_workflow_runs PRIMARY KEY (id),
    CONSTRAINT uq_workflow_runs_trigger UNIQUE (workflow_id, scheduled_at)
);
CREATE TABLE workflow_run_nodes (
    run_id       VARCHAR(36) COLLATE "C" NOT NULL,
    node_id      VARCHAR(64) COLLATE "C" NOT NULL,
    position     BIGINT      NOT NULL,
    status       VARCHAR(16) COLLATE "C" NOT NULL,
    execution_id VARCHAR(36) COLLATE "C" NULL,
    decided_at   TIMESTAMPTZ NULL,
    updated_at   TIMESTAMPTZ NOT NULL,
    CONSTRAINT pk_workflow_run_nodes PRIMARY KEY (run_id, node_id),
    CONSTRAINT uq_workflow_run_nodes_execution UNIQUE (execution_id)
);
-- Child jobs (issue 34, part 3): `job_followups` names the jobs a job's
-- execution triggers when it ends (`outcome`: success or failure);
-- `jobs.has_followups` lets the results transaction skip the lookup for
-- every other job.
CREATE TABLE job_followups (
    job_id     VARCHAR(36)  COLLATE "C" NOT NULL,
    outcome    VARCHAR(16)  COLLATE "C" NOT NULL,
    child_id   VARCHAR(36)  COLLATE "C" NOT NULL,
    tenant     VARCHAR(128) COLLATE "C" NOT NULL,
    created_at TIMESTAMPTZ  NOT NULL,
    CONSTRAINT pk_job_followups PRIMARY KEY (job_id, outcome, child_id)
);
