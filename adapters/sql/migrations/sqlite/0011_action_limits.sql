-- Issue 32: a per-key token bucket for actions that make executions or
-- deliveries (trigger, resume, redeliver), overridable per tenant like the
-- create bucket. NULL: the server's default.
ALTER TABLE tenants ADD COLUMN action_rate_per_sec REAL NULL;
ALTER TABLE tenants ADD COLUMN action_burst INTEGER NULL;
