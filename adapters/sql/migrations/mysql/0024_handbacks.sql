-- Rollouts that fail no job (issue 45): attempts handed back by a worker
-- that stopped before its handler finished (its drain window was over) are
-- retried once without counting against the job's maxAttempts. This counts
-- the retries so granted; the attempts counted are attempt - handbacks.
ALTER TABLE executions ADD COLUMN handbacks BIGINT NOT NULL DEFAULT 0;
