-- Mirrors migrations/mysql/0005_tenants.sql: tenants (every tenant id a job
-- already uses, and `default`), API keys (hash only) and the audit trail.

CREATE TABLE tenants (
    id                   TEXT    NOT NULL PRIMARY KEY,
    callback_secret      TEXT    NULL,
    previous_secret      TEXT    NULL,
    previous_valid_until INTEGER NULL,
    create_rate_per_sec  REAL    NULL,
    create_burst         INTEGER NULL,
    max_live_jobs        INTEGER NULL,
    created_at           INTEGER NOT NULL,
    updated_at           INTEGER NOT NULL
);

INSERT INTO tenants (id, created_at, updated_at)
    VALUES ('default', CAST(strftime('%s', 'now') AS INTEGER) * 1000,
            CAST(strftime('%s', 'now') AS INTEGER) * 1000);
INSERT OR IGNORE INTO tenants (id, created_at, updated_at)
    SELECT DISTINCT tenant, CAST(strftime('%s', 'now') AS INTEGER) * 1000,
           CAST(strftime('%s', 'now') AS INTEGER) * 1000 FROM jobs;

CREATE TABLE api_keys (
    prefix      TEXT    NOT NULL PRIMARY KEY,
    tenant      TEXT    NOT NULL REFERENCES tenants (id),
    role        TEXT    NOT NULL,
    secret_hash TEXT    NOT NULL,
    name        TEXT    NULL,
    expires_at  INTEGER NULL,
    revoked_at  INTEGER NULL,
    created_at  INTEGER NOT NULL
);
CREATE INDEX idx_api_keys_tenant ON api_keys (tenant, created_at);

CREATE TABLE audit_log (
    id      INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant  TEXT    NOT NULL,
    actor   TEXT    NOT NULL,
    action  TEXT    NOT NULL,
    target  TEXT    NOT NULL,
    at      INTEGER NOT NULL
);
CREATE INDEX idx_audit_log_tenant ON audit_log (tenant, id);

CREATE INDEX idx_jobs_tenant_status ON jobs (tenant, status);
