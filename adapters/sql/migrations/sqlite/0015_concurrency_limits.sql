-- Issue 33, part 4: concurrency limits. `jobs.max_concurrency` caps a job's
-- live (dispatched or running) executions; `concurrency_limits` holds the
-- operators' caps per handler and per tenant, keyed `<scope>:<name>`.
-- `concurrency_slots` lists the executions admitted under a limited key,
-- written in the transaction that dispatches them; a slot counts only while
-- its execution is live (the gate joins `executions`), so an execution that
-- ends by any path gives its slot back at once, and the row itself is
-- deleted the next time its key is gated. `executions.waiting_for` names
-- the key a pending execution waits for (`rate:<key>` for a rate). An
-- operator's limit may cap the rate of dispatches instead or as well: a
-- token bucket, `rate_tokens` counted at `rate_at`, written back by the
-- transaction that takes its tokens.
ALTER TABLE jobs ADD COLUMN max_concurrency INTEGER NULL;
ALTER TABLE executions ADD COLUMN waiting_for TEXT NULL;
CREATE TABLE concurrency_limits (
    scope_key   TEXT    NOT NULL PRIMARY KEY,
    scope       TEXT    NOT NULL,
    name        TEXT    NOT NULL,
    max_running  INTEGER NULL,
    rate_per_sec REAL    NULL,
    rate_tokens  REAL    NULL,
    rate_at      INTEGER NULL,
    updated_at   INTEGER NOT NULL
);
CREATE TABLE concurrency_slots (
    scope_key    TEXT    NOT NULL,
    execution_id TEXT    NOT NULL,
    created_at   INTEGER NOT NULL,
    PRIMARY KEY (scope_key, execution_id)
);
CREATE INDEX idx_concurrency_slots_execution ON concurrency_slots (execution_id);
