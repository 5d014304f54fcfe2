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
ALTER TABLE jobs
    ADD COLUMN max_concurrency BIGINT NULL;
ALTER TABLE executions
    ADD COLUMN waiting_for VARCHAR(400) NULL;
CREATE TABLE concurrency_limits (
    scope_key   VARCHAR(400) NOT NULL,
    scope       VARCHAR(16)  NOT NULL,
    name        VARCHAR(384) NOT NULL,
    max_running  BIGINT      NULL,
    rate_per_sec DOUBLE      NULL,
    rate_tokens  DOUBLE      NULL,
    rate_at      DATETIME(3) NULL,
    updated_at   DATETIME(3) NOT NULL,
    PRIMARY KEY (scope_key)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
CREATE TABLE concurrency_slots (
    scope_key    VARCHAR(400) NOT NULL,
    execution_id VARCHAR(36)  NOT NULL,
    created_at   DATETIME(3)  NOT NULL,
    PRIMARY KEY (scope_key, execution_id),
    KEY idx_concurrency_slots_execution (execution_id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
