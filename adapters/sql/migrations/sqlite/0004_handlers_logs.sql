-- Mirrors migrations/mysql/0004_handlers_logs.sql: a job's worker group, the
-- handlers and group workers announce, execution progress, and the bounded
-- execution log.

ALTER TABLE jobs ADD COLUMN worker_group TEXT NULL;

ALTER TABLE workers ADD COLUMN handlers TEXT NULL;
ALTER TABLE workers ADD COLUMN worker_group TEXT NULL;

ALTER TABLE executions ADD COLUMN progress REAL NULL;

CREATE TABLE execution_logs (
    id           INTEGER NOT NULL PRIMARY KEY AUTOINCREMENT,
    execution_id TEXT    NOT NULL,
    attempt      INTEGER NOT NULL,
    worker_id    TEXT    NOT NULL,
    at           INTEGER NOT NULL,
    level        TEXT    NOT NULL,
    message      TEXT    NOT NULL,
    bytes        INTEGER NOT NULL,
    created_at   INTEGER NOT NULL
) STRICT;
CREATE INDEX idx_execution_logs_execution ON execution_logs (execution_id, id);
CREATE INDEX idx_execution_logs_created ON execution_logs (created_at);
