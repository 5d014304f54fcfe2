-- Kairos schema for SQLite, mirroring migrations/mysql table for table (same
-- columns, keys and index names). STRICT tables make SQLite refuse a value of
-- the wrong type instead of storing it silently.

CREATE TABLE jobs (
    id                TEXT    NOT NULL PRIMARY KEY,
    tenant            TEXT    NOT NULL,
    name              TEXT    NOT NULL,
    handler           TEXT    NOT NULL,
    params            TEXT    NOT NULL,
    schedule_kind     TEXT    NOT NULL,
    cron_expr         TEXT    NULL,
    timezone          TEXT    NULL,
    once_at           INTEGER NULL,
    next_trigger_at   INTEGER NULL,
    status            TEXT    NOT NULL,
    version           INTEGER NOT NULL,
    callback_url      TEXT    NULL,
    client_request_id TEXT    NULL,
    request_hash      TEXT    NULL,
    max_attempts      INTEGER NOT NULL,
    retry_backoff_ms  INTEGER NOT NULL,
    timeout_ms        INTEGER NULL,
    created_at        INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL
) STRICT;
CREATE UNIQUE INDEX uq_jobs_tenant_request ON jobs (tenant, client_request_id);
CREATE INDEX idx_jobs_status_next ON jobs (status, next_trigger_at);
CREATE INDEX idx_jobs_tenant_created ON jobs (tenant, created_at, id);

CREATE TABLE executions (
    id            TEXT    NOT NULL PRIMARY KEY,
    job_id        TEXT    NOT NULL REFERENCES jobs (id),
    tenant        TEXT    NOT NULL,
    scheduled_at  INTEGER NOT NULL,
    attempt       INTEGER NOT NULL,
    status        TEXT    NOT NULL,
    worker_id     TEXT    NULL,
    output        TEXT    NULL,
    error         TEXT    NULL,
    not_before    INTEGER NOT NULL,
    dispatched_at INTEGER NULL,
    started_at    INTEGER NULL,
    finished_at   INTEGER NULL,
    deadline_at   INTEGER NULL,
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL
) STRICT;
CREATE UNIQUE INDEX uq_executions_trigger ON executions (job_id, scheduled_at);
CREATE INDEX idx_executions_status_not_before ON executions (status, not_before);
CREATE INDEX idx_executions_worker_status ON executions (worker_id, status);

CREATE TABLE execution_events (
    id           INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    execution_id TEXT    NOT NULL REFERENCES executions (id),
    attempt      INTEGER NOT NULL,
    status       TEXT    NOT NULL,
    worker_id    TEXT    NULL,
    error        TEXT    NULL,
    occurred_at  INTEGER NOT NULL
) STRICT;
CREATE INDEX idx_execution_events_execution ON execution_events (execution_id, id);

CREATE TABLE workers (
    id                TEXT    NOT NULL PRIMARY KEY,
    queue             TEXT    NOT NULL,
    capacity          INTEGER NOT NULL,
    active            INTEGER NOT NULL,
    avg_cost_ms       REAL    NOT NULL,
    cpu_idle          REAL    NOT NULL,
    state             TEXT    NOT NULL,
    last_heartbeat_at INTEGER NOT NULL,
    registered_at     INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL
) STRICT;

-- The callback outbox; id is the delivery id the receiver sees on every attempt.
CREATE TABLE callbacks (
    id              TEXT    NOT NULL PRIMARY KEY,
    execution_id    TEXT    NOT NULL REFERENCES executions (id),
    job_id          TEXT    NOT NULL,
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
CREATE INDEX idx_callbacks_state_next ON callbacks (state, next_attempt_at);
CREATE INDEX idx_callbacks_execution ON callbacks (execution_id, created_at);

CREATE TABLE callback_attempts (
    id           INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    callback_id  TEXT    NOT NULL REFERENCES callbacks (id),
    attempt      INTEGER NOT NULL,
    attempted_at INTEGER NOT NULL,
    status_code  INTEGER NULL,
    latency_ms   INTEGER NOT NULL,
    error        TEXT    NULL
) STRICT;
CREATE INDEX idx_callback_attempts_callback ON callback_attempts (callback_id, id);

-- Highest fencing token each lease has written with; older leaders are refused.
CREATE TABLE leader_fences (
    name  TEXT    NOT NULL PRIMARY KEY,
    fence INTEGER NOT NULL
) STRICT;
