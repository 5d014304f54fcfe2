-- Issue 35. `revision` is the caller's version of a job: bumped by an edit,
-- pause, resume or cancel, never by the scheduler's claims and results, so
-- editing a job that fires every second no longer conflicts with the
-- scheduler's bookkeeping (`version` stays the claims' check). It starts at
-- the version a caller could have read, so a version read before the
-- upgrade is still the one an edit expects.
--
-- `last_result`, `last_result_at` and `fail_streak` are the job's latest
-- finished execution and its failures in a row, written in the transaction
-- that finishes the execution: a list shows each job's health without
-- reading its executions. Jobs start without (until their next result).
ALTER TABLE jobs
    ADD COLUMN revision BIGINT NOT NULL DEFAULT 1,
    ADD COLUMN last_result VARCHAR(16) NULL,
    ADD COLUMN last_result_at DATETIME(3) NULL,
    ADD COLUMN fail_streak BIGINT NOT NULL DEFAULT 0;
UPDATE jobs SET revision = version;
