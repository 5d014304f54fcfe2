-- Kairos schema for MySQL/MariaDB. migrations/sqlite mirrors it table for
-- table. Times are BIGINT milliseconds since the epoch (UTC), JSON is text,
-- ids are UUID text: the portable subset that sqlx's Any driver can carry.

CREATE TABLE jobs (
    id                VARCHAR(36)   NOT NULL,
    tenant            VARCHAR(128)  NOT NULL,
    name              VARCHAR(255)  NOT NULL,
    handler           VARCHAR(255)  NOT NULL,
    params            LONGTEXT      NOT NULL,
    schedule_kind     VARCHAR(8)    NOT NULL,
    cron_expr         VARCHAR(255)  NULL,
    timezone          VARCHAR(64)   NULL,
    once_at           BIGINT        NULL,
    next_trigger_at   BIGINT        NULL,
    status            VARCHAR(16)   NOT NULL,
    version           BIGINT        NOT NULL,
    callback_url      VARCHAR(2048) NULL,
    client_request_id VARCHAR(255)  NULL,
    request_hash      VARCHAR(128)  NULL,
    max_attempts      BIGINT        NOT NULL,
    retry_backoff_ms  BIGINT        NOT NULL,
    timeout_ms        BIGINT        NULL,
    created_at        BIGINT        NOT NULL,
    updated_at        BIGINT        NOT NULL,
    PRIMARY KEY (id),
    UNIQUE KEY uq_jobs_tenant_request (tenant, client_request_id),
    KEY idx_jobs_status_next (status, next_trigger_at),
    KEY idx_jobs_tenant_created (tenant, created_at, id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE executions (
    id            VARCHAR(36)  NOT NULL,
    job_id        VARCHAR(36)  NOT NULL,
    tenant        VARCHAR(128) NOT NULL,
    scheduled_at  BIGINT       NOT NULL,
    attempt       BIGINT       NOT NULL,
    status        VARCHAR(16)  NOT NULL,
    worker_id     VARCHAR(255) NULL,
    output        LONGTEXT     NULL,
    error         TEXT         NULL,
    not_before    BIGINT       NOT NULL,
    dispatched_at BIGINT       NULL,
    started_at    BIGINT       NULL,
    finished_at   BIGINT       NULL,
    deadline_at   BIGINT       NULL,
    created_at    BIGINT       NOT NULL,
    updated_at    BIGINT       NOT NULL,
    PRIMARY KEY (id),
    UNIQUE KEY uq_executions_trigger (job_id, scheduled_at),
    KEY idx_executions_status_not_before (status, not_before),
    KEY idx_executions_worker_status (worker_id, status),
    CONSTRAINT fk_executions_job FOREIGN KEY (job_id) REFERENCES jobs (id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE execution_events (
    id           BIGINT       NOT NULL AUTO_INCREMENT,
    execution_id VARCHAR(36)  NOT NULL,
    attempt      BIGINT       NOT NULL,
    status       VARCHAR(16)  NOT NULL,
    worker_id    VARCHAR(255) NULL,
    error        TEXT         NULL,
    occurred_at  BIGINT       NOT NULL,
    PRIMARY KEY (id),
    KEY idx_execution_events_execution (execution_id, id),
    CONSTRAINT fk_execution_events_execution FOREIGN KEY (execution_id) REFERENCES executions (id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE workers (
    id                VARCHAR(255) NOT NULL,
    queue             VARCHAR(255) NOT NULL,
    capacity          BIGINT       NOT NULL,
    active            BIGINT       NOT NULL,
    avg_cost_ms       DOUBLE       NOT NULL,
    cpu_idle          DOUBLE       NOT NULL,
    state             VARCHAR(16)  NOT NULL,
    last_heartbeat_at BIGINT       NOT NULL,
    registered_at     BIGINT       NOT NULL,
    updated_at        BIGINT       NOT NULL,
    PRIMARY KEY (id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- The callback outbox; id is the delivery id the receiver sees on every attempt.
CREATE TABLE callbacks (
    id              VARCHAR(36)   NOT NULL,
    execution_id    VARCHAR(36)   NOT NULL,
    job_id          VARCHAR(36)   NOT NULL,
    tenant          VARCHAR(128)  NOT NULL,
    url             VARCHAR(2048) NOT NULL,
    payload         LONGTEXT      NOT NULL,
    state           VARCHAR(16)   NOT NULL,
    attempts        BIGINT        NOT NULL,
    next_attempt_at BIGINT        NOT NULL,
    last_error      TEXT          NULL,
    lease_owner     VARCHAR(255)  NULL,
    lease_token     VARCHAR(36)   NULL,
    lease_until     BIGINT        NULL,
    created_at      BIGINT        NOT NULL,
    updated_at      BIGINT        NOT NULL,
    PRIMARY KEY (id),
    KEY idx_callbacks_state_next (state, next_attempt_at),
    KEY idx_callbacks_execution (execution_id, created_at),
    CONSTRAINT fk_callbacks_execution FOREIGN KEY (execution_id) REFERENCES executions (id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE callback_attempts (
    id           BIGINT      NOT NULL AUTO_INCREMENT,
    callback_id  VARCHAR(36) NOT NULL,
    attempt      BIGINT      NOT NULL,
    attempted_at BIGINT      NOT NULL,
    status_code  BIGINT      NULL,
    latency_ms   BIGINT      NOT NULL,
    error        TEXT        NULL,
    PRIMARY KEY (id),
    KEY idx_callback_attempts_callback (callback_id, id),
    CONSTRAINT fk_callback_attempts_callback FOREIGN KEY (callback_id) REFERENCES callbacks (id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- Highest fencing token each lease has written with; older leaders are refused.
CREATE TABLE leader_fences (
    name  VARCHAR(64) NOT NULL,
    fence BIGINT      NOT NULL,
    PRIMARY KEY (name)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
