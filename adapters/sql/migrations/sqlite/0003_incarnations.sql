-- Mirrors migrations/mysql/0003_incarnations.sql: worker incarnations, the
-- attempts a worker last said it holds, and the incarnation that started an
-- execution's current attempt.

ALTER TABLE workers ADD COLUMN incarnation TEXT NULL;
ALTER TABLE workers ADD COLUMN held TEXT NULL;

ALTER TABLE executions ADD COLUMN incarnation TEXT NULL;

CREATE TABLE worker_incarnations (
    worker_id   TEXT    NOT NULL,
    incarnation TEXT    NOT NULL,
    seen_at     INTEGER NOT NULL,
    retired_at  INTEGER NULL,
    PRIMARY KEY (worker_id, incarnation)
);
CREATE INDEX idx_worker_incarnations_incarnation ON worker_incarnations (incarnation);
