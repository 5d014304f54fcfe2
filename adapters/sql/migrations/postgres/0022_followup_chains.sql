-- Issue 44: follow-ups and workflow runs made safe by construction.
-- `followup_graph_locks`: one row per tenant, locked by every change of the
-- tenant's follow-ups, so the cycle check and the write are one step (two
-- concurrent changes A→B and B→A take turns, and the second sees the first).
CREATE TABLE followup_graph_locks (
    tenant     VARCHAR(128) COLLATE "C" NOT NULL,
    changes    BIGINT       NOT NULL DEFAULT 0,
    CONSTRAINT pk_followup_graph_locks PRIMARY KEY (tenant)
);
-- A chain: what one trigger's follow-ups set off, named by the execution
-- that started it. `executions` counts the chain's executions (its budget),
-- `stopped_at` is set when the budget stopped it.
CREATE TABLE followup_chains (
    chain_id   VARCHAR(36)  COLLATE "C" NOT NULL,
    tenant     VARCHAR(128) COLLATE "C" NOT NULL,
    executions BIGINT       NOT NULL,
    stopped_at TIMESTAMPTZ  NULL,
    created_at TIMESTAMPTZ  NOT NULL,
    CONSTRAINT pk_followup_chains PRIMARY KEY (chain_id)
);
CREATE INDEX ix_followup_chains_created ON followup_chains (created_at);
-- The jobs a chain ran (or refused once its budget was spent), each once.
CREATE TABLE followup_chain_jobs (
    chain_id     VARCHAR(36) COLLATE "C" NOT NULL,
    job_id       VARCHAR(36) COLLATE "C" NOT NULL,
    execution_id VARCHAR(36) COLLATE "C" NOT NULL,
    CONSTRAINT pk_followup_chain_jobs PRIMARY KEY (chain_id, job_id),
    CONSTRAINT uq_followup_chain_jobs_execution UNIQUE (execution_id)
);
-- The bytes of parent outputs a run has stored in its executions so far
-- (capped per run).
ALTER TABLE workflow_runs ADD COLUMN parent_outputs_bytes BIGINT NOT NULL DEFAULT 0;
