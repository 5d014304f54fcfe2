-- Native column types: every time becomes TIMESTAMPTZ instead of BIGINT
-- milliseconds, and every JSON document JSONB instead of TEXT, so the tables
-- read naturally with PostgreSQL's own tools and functions. Each column is
-- converted in place (`USING`), exactly: epoch plus the milliseconds as an
-- interval. Indexes on the columns are rebuilt by PostgreSQL. Existing rows
-- are kept.

ALTER TABLE jobs
    ALTER COLUMN once_at TYPE TIMESTAMPTZ USING TIMESTAMPTZ 'epoch' + once_at * INTERVAL '1 millisecond',
    ALTER COLUMN next_trigger_at TYPE TIMESTAMPTZ USING TIMESTAMPTZ 'epoch' + next_trigger_at * INTERVAL '1 millisecond',
    ALTER COLUMN start_at TYPE TIMESTAMPTZ USING TIMESTAMPTZ 'epoch' + start_at * INTERVAL '1 millisecond',
    ALTER COLUMN end_at TYPE TIMESTAMPTZ USING TIMESTAMPTZ 'epoch' + end_at * INTERVAL '1 millisecond',
    ALTER COLUMN created_at TYPE TIMESTAMPTZ USING TIMESTAMPTZ 'epoch' + created_at * INTERVAL '1 millisecond',
    ALTER COLUMN updated_at TYPE TIMESTAMPTZ USING TIMESTAMPTZ 'epoch' + updated_at * INTERVAL '1 millisecond',
    ALTER COLUMN params TYPE JSONB USING params::jsonb;

ALTER TABLE executions
    ALTER COLUMN scheduled_at TYPE TIMESTAMPTZ USING TIMESTAMPTZ 'epoch' + scheduled_at * INTERVAL '1 millisecond',
    ALTER COLUMN not_before TYPE TIMESTAMPTZ USING TIMESTAMPTZ 'epoch' + not_before * INTERVAL '1 millisecond',
    ALTER COLUMN dispatched_at TYPE TIMESTAMPTZ USING TIMESTAMPTZ 'epoch' + dispatched_at * INTERVAL '1 millisecond',
    ALTER COLUMN started_at TYPE TIMESTAMPTZ USING TIMESTAMPTZ 'epoch' + started_at * INTERVAL '1 millisecond',
    ALTER COLUMN finished_at TYPE TIMESTAMPTZ USING TIMESTAMPTZ 'epoch' + finished_at * INTERVAL '1 millisecond',
    ALTER COLUMN deadline_at TYPE TIMESTAMPTZ USING TIMESTAMPTZ 'epoch' + deadline_at * INTERVAL '1 millisecond',
    ALTER COLUMN stop_requested_at TYPE TIMESTAMPTZ USING TIMESTAMPTZ 'epoch' + stop_requested_at * INTERVAL '1 millisecond',
    ALTER COLUMN created_at TYPE TIMESTAMPTZ USING TIMESTAMPTZ 'epoch' + created_at * INTERVAL '1 millisecond',
    ALTER COLUMN updated_at TYPE TIMESTAMPTZ USING TIMESTAMPTZ 'epoch' + updated_at * INTERVAL '1 millisecond',
    ALTER COLUMN output TYPE JSONB USING output::jsonb;

ALTER TABLE execution_events
    ALTER COLUMN occurred_at TYPE TIMESTAMPTZ USING TIMESTAMPTZ 'epoch' + occurred_at * INTERVAL '1 millisecond';

ALTER TABLE workers
    ALTER COLUMN last_heartbeat_at TYPE TIMESTAMPTZ USING TIMESTAMPTZ 'epoch' + last_heartbeat_at * INTERVAL '1 millisecond',
    ALTER COLUMN registered_at TYPE TIMESTAMPTZ USING TIMESTAMPTZ 'epoch' + registered_at * INTERVAL '1 millisecond',
    ALTER COLUMN updated_at TYPE TIMESTAMPTZ USING TIMESTAMPTZ 'epoch' + updated_at * INTERVAL '1 millisecond',
    ALTER COLUMN held TYPE JSONB USING held::jsonb,
    ALTER COLUMN handlers TYPE JSONB USING handlers::jsonb;

ALTER TABLE callbacks
    ALTER COLUMN next_attempt_at TYPE TIMESTAMPTZ USING TIMESTAMPTZ 'epoch' + next_attempt_at * INTERVAL '1 millisecond',
    ALTER COLUMN lease_until TYPE TIMESTAMPTZ USING TIMESTAMPTZ 'epoch' + lease_until * INTERVAL '1 millisecond',
    ALTER COLUMN created_at TYPE TIMESTAMPTZ USING TIMESTAMPTZ 'epoch' + created_at * INTERVAL '1 millisecond',
    ALTER COLUMN updated_at TYPE TIMESTAMPTZ USING TIMESTAMPTZ 'epoch' + updated_at * INTERVAL '1 millisecond',
    ALTER COLUMN payload TYPE JSONB USING payload::jsonb;

ALTER TABLE callback_attempts
    ALTER COLUMN attempted_at TYPE TIMESTAMPTZ USING TIMESTAMPTZ 'epoch' + attempted_at * INTERVAL '1 millisecond';

ALTER TABLE worker_incarnations
    ALTER COLUMN seen_at TYPE TIMESTAMPTZ USING TIMESTAMPTZ 'epoch' + seen_at * INTERVAL '1 millisecond',
    ALTER COLUMN retired_at TYPE TIMESTAMPTZ USING TIMESTAMPTZ 'epoch' + retired_at * INTERVAL '1 millisecond';

ALTER TABLE execution_logs
    ALTER COLUMN at TYPE TIMESTAMPTZ USING TIMESTAMPTZ 'epoch' + at * INTERVAL '1 millisecond',
    ALTER COLUMN created_at TYPE TIMESTAMPTZ USING TIMESTAMPTZ 'epoch' + created_at * INTERVAL '1 millisecond';

ALTER TABLE tenants
    ALTER COLUMN previous_valid_until TYPE TIMESTAMPTZ USING TIMESTAMPTZ 'epoch' + previous_valid_until * INTERVAL '1 millisecond',
    ALTER COLUMN created_at TYPE TIMESTAMPTZ USING TIMESTAMPTZ 'epoch' + created_at * INTERVAL '1 millisecond',
    ALTER COLUMN updated_at TYPE TIMESTAMPTZ USING TIMESTAMPTZ 'epoch' + updated_at * INTERVAL '1 millisecond';

ALTER TABLE api_keys
    ALTER COLUMN expires_at TYPE TIMESTAMPTZ USING TIMESTAMPTZ 'epoch' + expires_at * INTERVAL '1 millisecond',
    ALTER COLUMN revoked_at TYPE TIMESTAMPTZ USING TIMESTAMPTZ 'epoch' + revoked_at * INTERVAL '1 millisecond',
    ALTER COLUMN created_at TYPE TIMESTAMPTZ USING TIMESTAMPTZ 'epoch' + created_at * INTERVAL '1 millisecond';

ALTER TABLE audit_log
    ALTER COLUMN at TYPE TIMESTAMPTZ USING TIMESTAMPTZ 'epoch' + at * INTERVAL '1 millisecond';
