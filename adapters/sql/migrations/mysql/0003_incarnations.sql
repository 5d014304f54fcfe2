-- Worker incarnations (issue 11): every worker process has a fresh
-- incarnation id. The workers row keeps the latest one and the attempts the
-- worker last said it holds; an execution keeps the incarnation that started
-- its current attempt; worker_incarnations remembers which ones a later
-- process of the same worker id replaced (their results change nothing).

ALTER TABLE workers
    ADD COLUMN incarnation VARCHAR(128) NULL,
    ADD COLUMN held        LONGTEXT     NULL;

ALTER TABLE executions
    ADD COLUMN incarnation VARCHAR(128) NULL;

CREATE TABLE worker_incarnations (
    worker_id   VARCHAR(255) NOT NULL,
    incarnation VARCHAR(128) NOT NULL,
    seen_at     BIGINT       NOT NULL,
    retired_at  BIGINT       NULL,
    PRIMARY KEY (worker_id, incarnation),
    KEY idx_worker_incarnations_incarnation (incarnation)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
