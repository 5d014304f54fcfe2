-- Mirrors migrations/mysql/0003_incarnations.sql: worker incarnations (a
-- fresh id per worker process), the attempts a worker last said it holds,
-- the incarnation that started an execution's current attempt, and which
-- incarnations a later process of the same worker id replaced.

ALTER TABLE workers
    ADD COLUMN incarnation VARCHAR(128) COLLATE "C" NULL,
    ADD COLUMN held        TEXT         NULL;

ALTER TABLE executions
    ADD COLUMN incarnation VARCHAR(128) COLLATE "C" NULL;

CREATE TABLE worker_incarnations (
    worker_id   VARCHAR(255) COLLATE "C" NOT NULL,
    incarnation VARCHAR(128) COLLATE "C" NOT NULL,
    seen_at     BIGINT       NOT NULL,
    retired_at  BIGINT       NULL,
    CONSTRAINT pk_worker_incarnations PRIMARY KEY (worker_id, incarnation)
);
CREATE INDEX idx_worker_incarnations_incarnation ON worker_incarnations (incarnation);
