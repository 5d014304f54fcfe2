-- Issue 44: follow-ups and workflow runs made safe by construction.
-- `followup_graph_locks`: one row per tenant, written by every change of the
-- tenant's follow-ups (SQLite's single writer serializes them anyway; the
-- table is kept alike on every database).
CREATE TABLE followup_graph_locks (
    tenant     TEXT    NOT NULL PRIMARY KEY,
    changes    INTEGER NOT NULL DEFAULT 0
) STRICT;
-- A chain: what one trigger's follow-ups set off, named by the execution
-- that started it. `executions` counts the chain's executions (its budget),
-- `stopped_at` is set when the budget stopped it.
CREATE TABLE followup_chains (
    chain_id   TEXT    NOT NULL PRIMARY KEY,
    tenant     TEXT    NOT NULL,
    executions INTEGER NOT NULL,
    stopped_at INTEGER NULL,
    created_at INTEGER NOT NULL
) STRICT;
CREATE INDEX ix_followup_chains_created ON followup_chains (created_at);
-- The jobs a chain ran (or refused once its budget was spent), each once.
CREATE TABLE followup_chain_jobs (
    chain_id     TEXT NOT NULL,
    job_id       TEXT NOT NULL,
    execution_id TEXT NOT NULL,
    PRIMARY KEY (chain_id, job_id)
) STRICT;
CREATE UNIQUE INDEX uq_followup_chain_jobs_execution ON followup_chain_jobs (execution_id);
-- The bytes of parent outputs a run has stored in its executions so far
-- (capped per run).
ALTER TABLE workflow_runs ADD COLUMN parent_outputs_bytes INTEGER NOT NULL DEFAULT 0;
