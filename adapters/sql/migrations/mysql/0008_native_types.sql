-- Native column types: every time becomes DATETIME(3) (UTC wall-clock time,
-- millisecond precision) instead of BIGINT milliseconds, and every JSON
-- document JSON instead of LONGTEXT, so the tables read naturally with the
-- database's own tools and functions.
--
-- A BIGINT cannot be MODIFYed into a DATETIME (MySQL would read the number as
-- YYYYMMDDhhmmss), so each time gets a new column, filled by date arithmetic
-- (independent of the session's time zone, and valid past 2038), which then
-- replaces the old one. Indexes that hold a time are dropped and rebuilt in
-- the same statement as the column swap. Existing rows are kept.

ALTER TABLE jobs
    ADD COLUMN once_at__t         DATETIME(3) NULL,
    ADD COLUMN next_trigger_at__t DATETIME(3) NULL,
    ADD COLUMN start_at__t        DATETIME(3) NULL,
    ADD COLUMN end_at__t          DATETIME(3) NULL,
    ADD COLUMN created_at__t      DATETIME(3) NULL,
    ADD COLUMN updated_at__t      DATETIME(3) NULL;
UPDATE jobs SET
    once_at__t         = DATE_ADD('1970-01-01', INTERVAL once_at * 1000 MICROSECOND),
    next_trigger_at__t = DATE_ADD('1970-01-01', INTERVAL next_trigger_at * 1000 MICROSECOND),
    start_at__t        = DATE_ADD('1970-01-01', INTERVAL start_at * 1000 MICROSECOND),
    end_at__t          = DATE_ADD('1970-01-01', INTERVAL end_at * 1000 MICROSECOND),
    created_at__t      = DATE_ADD('1970-01-01', INTERVAL created_at * 1000 MICROSECOND),
    updated_at__t      = DATE_ADD('1970-01-01', INTERVAL updated_at * 1000 MICROSECOND);
ALTER TABLE jobs
    DROP INDEX idx_jobs_status_next,
    DROP INDEX idx_jobs_tenant_created,
    DROP COLUMN once_at,
    DROP COLUMN next_trigger_at,
    DROP COLUMN start_at,
    DROP COLUMN end_at,
    DROP COLUMN created_at,
    DROP COLUMN updated_at,
    CHANGE COLUMN once_at__t         once_at         DATETIME(3) NULL,
    CHANGE COLUMN next_trigger_at__t next_trigger_at DATETIME(3) NULL,
    CHANGE COLUMN start_at__t        start_at        DATETIME(3) NULL,
    CHANGE COLUMN end_at__t          end_at          DATETIME(3) NULL,
    CHANGE COLUMN created_at__t      created_at      DATETIME(3) NOT NULL,
    CHANGE COLUMN updated_at__t      updated_at      DATETIME(3) NOT NULL,
    MODIFY COLUMN params JSON NOT NULL,
    ADD KEY idx_jobs_status_next (status, next_trigger_at),
    ADD KEY idx_jobs_tenant_created (tenant, created_at, id);

ALTER TABLE executions
    ADD COLUMN scheduled_at__t      DATETIME(3) NULL,
    ADD COLUMN not_before__t        DATETIME(3) NULL,
    ADD COLUMN dispatched_at__t     DATETIME(3) NULL,
    ADD COLUMN started_at__t        DATETIME(3) NULL,
    ADD COLUMN finished_at__t       DATETIME(3) NULL,
    ADD COLUMN deadline_at__t       DATETIME(3) NULL,
    ADD COLUMN stop_requested_at__t DATETIME(3) NULL,
    ADD COLUMN created_at__t        DATETIME(3) NULL,
    ADD COLUMN updated_at__t        DATETIME(3) NULL;
UPDATE executions SET
    scheduled_at__t      = DATE_ADD('1970-01-01', INTERVAL scheduled_at * 1000 MICROSECOND),
    not_before__t        = DATE_ADD('1970-01-01', INTERVAL not_before * 1000 MICROSECOND),
    dispatched_at__t     = DATE_ADD('1970-01-01', INTERVAL dispatched_at * 1000 MICROSECOND),
    started_at__t        = DATE_ADD('1970-01-01', INTERVAL started_at * 1000 MICROSECOND),
    finished_at__t       = DATE_ADD('1970-01-01', INTERVAL finished_at * 1000 MICROSECOND),
    deadline_at__t       = DATE_ADD('1970-01-01', INTERVAL deadline_at * 1000 MICROSECOND),
    stop_requested_at__t = DATE_ADD('1970-01-01', INTERVAL stop_requested_at * 1000 MICROSECOND),
    created_at__t        = DATE_ADD('1970-01-01', INTERVAL created_at * 1000 MICROSECOND),
    updated_at__t        = DATE_ADD('1970-01-01', INTERVAL updated_at * 1000 MICROSECOND);
ALTER TABLE executions
    DROP INDEX uq_executions_trigger,
    DROP INDEX idx_executions_status_not_before,
    DROP INDEX idx_executions_stop_requested,
    DROP INDEX idx_executions_tenant_scheduled,
    DROP COLUMN scheduled_at,
    DROP COLUMN not_before,
    DROP COLUMN dispatched_at,
    DROP COLUMN started_at,
    DROP COLUMN finished_at,
    DROP COLUMN deadline_at,
    DROP COLUMN stop_requested_at,
    DROP COLUMN created_at,
    DROP COLUMN updated_at,
    CHANGE COLUMN scheduled_at__t      scheduled_at      DATETIME(3) NOT NULL,
    CHANGE COLUMN not_before__t        not_before        DATETIME(3) NOT NULL,
    CHANGE COLUMN dispatched_at__t     dispatched_at     DATETIME(3) NULL,
    CHANGE COLUMN started_at__t        started_at        DATETIME(3) NULL,
    CHANGE COLUMN finished_at__t       finished_at       DATETIME(3) NULL,
    CHANGE COLUMN deadline_at__t       deadline_at       DATETIME(3) NULL,
    CHANGE COLUMN stop_requested_at__t stop_requested_at DATETIME(3) NULL,
    CHANGE COLUMN created_at__t        created_at        DATETIME(3) NOT NULL,
    CHANGE COLUMN updated_at__t        updated_at        DATETIME(3) NOT NULL,
    MODIFY COLUMN output JSON NULL,
    ADD UNIQUE KEY uq_executions_trigger (job_id, scheduled_at),
    ADD KEY idx_executions_status_not_before (status, not_before),
    ADD KEY idx_executions_stop_requested (stop_requested_at),
    ADD KEY idx_executions_tenant_scheduled (tenant, scheduled_at, id);

ALTER TABLE execution_events ADD COLUMN occurred_at__t DATETIME(3) NULL;
UPDATE execution_events SET
    occurred_at__t = DATE_ADD('1970-01-01', INTERVAL occurred_at * 1000 MICROSECOND);
ALTER TABLE execution_events
    DROP COLUMN occurred_at,
    CHANGE COLUMN occurred_at__t occurred_at DATETIME(3) NOT NULL;

ALTER TABLE workers
    ADD COLUMN last_heartbeat_at__t DATETIME(3) NULL,
    ADD COLUMN registered_at__t     DATETIME(3) NULL,
    ADD COLUMN updated_at__t        DATETIME(3) NULL;
UPDATE workers SET
    last_heartbeat_at__t = DATE_ADD('1970-01-01', INTERVAL last_heartbeat_at * 1000 MICROSECOND),
    registered_at__t     = DATE_ADD('1970-01-01', INTERVAL registered_at * 1000 MICROSECOND),
    updated_at__t        = DATE_ADD('1970-01-01', INTERVAL updated_at * 1000 MICROSECOND);
ALTER TABLE workers
    DROP COLUMN last_heartbeat_at,
    DROP COLUMN registered_at,
    DROP COLUMN updated_at,
    CHANGE COLUMN last_heartbeat_at__t last_heartbeat_at DATETIME(3) NOT NULL,
    CHANGE COLUMN registered_at__t     registered_at     DATETIME(3) NOT NULL,
    CHANGE COLUMN updated_at__t        updated_at        DATETIME(3) NOT NULL,
    MODIFY COLUMN held JSON NULL,
    MODIFY COLUMN handlers JSON NULL;

ALTER TABLE callbacks
    ADD COLUMN next_attempt_at__t DATETIME(3) NULL,
    ADD COLUMN lease_until__t     DATETIME(3) NULL,
    ADD COLUMN created_at__t      DATETIME(3) NULL,
    ADD COLUMN updated_at__t      DATETIME(3) NULL;
UPDATE callbacks SET
    next_attempt_at__t = DATE_ADD('1970-01-01', INTERVAL next_attempt_at * 1000 MICROSECOND),
    lease_until__t     = DATE_ADD('1970-01-01', INTERVAL lease_until * 1000 MICROSECOND),
    created_at__t      = DATE_ADD('1970-01-01', INTERVAL created_at * 1000 MICROSECOND),
    updated_at__t      = DATE_ADD('1970-01-01', INTERVAL updated_at * 1000 MICROSECOND);
ALTER TABLE callbacks
    DROP INDEX idx_callbacks_state_next,
    DROP INDEX idx_callbacks_execution,
    DROP COLUMN next_attempt_at,
    DROP COLUMN lease_until,
    DROP COLUMN created_at,
    DROP COLUMN updated_at,
    CHANGE COLUMN next_attempt_at__t next_attempt_at DATETIME(3) NOT NULL,
    CHANGE COLUMN lease_until__t     lease_until     DATETIME(3) NULL,
    CHANGE COLUMN created_at__t      created_at      DATETIME(3) NOT NULL,
    CHANGE COLUMN updated_at__t      updated_at      DATETIME(3) NOT NULL,
    MODIFY COLUMN payload JSON NOT NULL,
    ADD KEY idx_callbacks_state_next (state, next_attempt_at),
    ADD KEY idx_callbacks_execution (execution_id, created_at);

ALTER TABLE callback_attempts ADD COLUMN attempted_at__t DATETIME(3) NULL;
UPDATE callback_attempts SET
    attempted_at__t = DATE_ADD('1970-01-01', INTERVAL attempted_at * 1000 MICROSECOND);
ALTER TABLE callback_attempts
    DROP COLUMN attempted_at,
    CHANGE COLUMN attempted_at__t attempted_at DATETIME(3) NOT NULL;

ALTER TABLE worker_incarnations
    ADD COLUMN seen_at__t    DATETIME(3) NULL,
    ADD COLUMN retired_at__t DATETIME(3) NULL;
UPDATE worker_incarnations SET
    seen_at__t    = DATE_ADD('1970-01-01', INTERVAL seen_at * 1000 MICROSECOND),
    retired_at__t = DATE_ADD('1970-01-01', INTERVAL retired_at * 1000 MICROSECOND);
ALTER TABLE worker_incarnations
    DROP COLUMN seen_at,
    DROP COLUMN retired_at,
    CHANGE COLUMN seen_at__t    seen_at    DATETIME(3) NOT NULL,
    CHANGE COLUMN retired_at__t retired_at DATETIME(3) NULL;

ALTER TABLE execution_logs
    ADD COLUMN at__t         DATETIME(3) NULL,
    ADD COLUMN created_at__t DATETIME(3) NULL;
UPDATE execution_logs SET
    at__t         = DATE_ADD('1970-01-01', INTERVAL at * 1000 MICROSECOND),
    created_at__t = DATE_ADD('1970-01-01', INTERVAL created_at * 1000 MICROSECOND);
ALTER TABLE execution_logs
    DROP INDEX idx_execution_logs_created,
    DROP COLUMN at,
    DROP COLUMN created_at,
    CHANGE COLUMN at__t         at         DATETIME(3) NOT NULL,
    CHANGE COLUMN created_at__t created_at DATETIME(3) NOT NULL,
    ADD KEY idx_execution_logs_created (created_at);

ALTER TABLE tenants
    ADD COLUMN previous_valid_until__t DATETIME(3) NULL,
    ADD COLUMN created_at__t           DATETIME(3) NULL,
    ADD COLUMN updated_at__t           DATETIME(3) NULL;
UPDATE tenants SET
    previous_valid_until__t = DATE_ADD('1970-01-01', INTERVAL previous_valid_until * 1000 MICROSECOND),
    created_at__t           = DATE_ADD('1970-01-01', INTERVAL created_at * 1000 MICROSECOND),
    updated_at__t           = DATE_ADD('1970-01-01', INTERVAL updated_at * 1000 MICROSECOND);
ALTER TABLE tenants
    DROP COLUMN previous_valid_until,
    DROP COLUMN created_at,
    DROP COLUMN updated_at,
    CHANGE COLUMN previous_valid_until__t previous_valid_until DATETIME(3) NULL,
    CHANGE COLUMN created_at__t           created_at           DATETIME(3) NOT NULL,
    CHANGE COLUMN updated_at__t           updated_at           DATETIME(3) NOT NULL;

ALTER TABLE api_keys
    ADD COLUMN expires_at__t DATETIME(3) NULL,
    ADD COLUMN revoked_at__t DATETIME(3) NULL,
    ADD COLUMN created_at__t DATETIME(3) NULL;
UPDATE api_keys SET
    expires_at__t = DATE_ADD('1970-01-01', INTERVAL expires_at * 1000 MICROSECOND),
    revoked_at__t = DATE_ADD('1970-01-01', INTERVAL revoked_at * 1000 MICROSECOND),
    created_at__t = DATE_ADD('1970-01-01', INTERVAL created_at * 1000 MICROSECOND);
ALTER TABLE api_keys
    DROP INDEX idx_api_keys_tenant,
    DROP COLUMN expires_at,
    DROP COLUMN revoked_at,
    DROP COLUMN created_at,
    CHANGE COLUMN expires_at__t expires_at DATETIME(3) NULL,
    CHANGE COLUMN revoked_at__t revoked_at DATETIME(3) NULL,
    CHANGE COLUMN created_at__t created_at DATETIME(3) NOT NULL,
    ADD KEY idx_api_keys_tenant (tenant, created_at);

ALTER TABLE audit_log ADD COLUMN at__t DATETIME(3) NULL;
UPDATE audit_log SET at__t = DATE_ADD('1970-01-01', INTERVAL at * 1000 MICROSECOND);
ALTER TABLE audit_log
    DROP COLUMN at,
    CHANGE COLUMN at__t at DATETIME(3) NOT NULL;
