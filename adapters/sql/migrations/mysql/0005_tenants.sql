-- Tenants, API keys and the audit trail (issue 12). jobs, executions and
-- callbacks already carry their tenant's id in a `tenant` column (copied
-- from the job, so tenant filters need no join); this adds the tenants those
-- ids name. Every tenant id already used by a job becomes a tenant, and the
-- `default` tenant always exists. Times are milliseconds since the epoch.

CREATE TABLE tenants (
    id                   VARCHAR(128) NOT NULL,
    callback_secret      VARCHAR(255) NULL,
    previous_secret      VARCHAR(255) NULL,
    previous_valid_until BIGINT       NULL,
    create_rate_per_sec  DOUBLE       NULL,
    create_burst         BIGINT       NULL,
    max_live_jobs        BIGINT       NULL,
    created_at           BIGINT       NOT NULL,
    updated_at           BIGINT       NOT NULL,
    PRIMARY KEY (id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

INSERT INTO tenants (id, created_at, updated_at)
    SELECT 'default', UNIX_TIMESTAMP() * 1000, UNIX_TIMESTAMP() * 1000;
INSERT IGNORE INTO tenants (id, created_at, updated_at)
    SELECT DISTINCT tenant, UNIX_TIMESTAMP() * 1000, UNIX_TIMESTAMP() * 1000 FROM jobs;

-- A key is `kai_<prefix>_<secret>`; only SHA-256(secret) is stored.
CREATE TABLE api_keys (
    prefix      VARCHAR(32)  NOT NULL,
    tenant      VARCHAR(128) NOT NULL,
    role        VARCHAR(16)  NOT NULL,
    secret_hash VARCHAR(64)  NOT NULL,
    name        VARCHAR(255) NULL,
    expires_at  BIGINT       NULL,
    revoked_at  BIGINT       NULL,
    created_at  BIGINT       NOT NULL,
    PRIMARY KEY (prefix),
    KEY idx_api_keys_tenant (tenant, created_at),
    CONSTRAINT fk_api_keys_tenant FOREIGN KEY (tenant) REFERENCES tenants (id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

CREATE TABLE audit_log (
    id      BIGINT       NOT NULL AUTO_INCREMENT,
    tenant  VARCHAR(128) NOT NULL,
    actor   VARCHAR(64)  NOT NULL,
    action  VARCHAR(64)  NOT NULL,
    target  VARCHAR(255) NOT NULL,
    at      BIGINT       NOT NULL,
    PRIMARY KEY (id),
    KEY idx_audit_log_tenant (tenant, id)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;

-- The live-jobs cap counts a tenant's non-terminal jobs on every create.
ALTER TABLE jobs ADD KEY idx_jobs_tenant_status (tenant, status);
