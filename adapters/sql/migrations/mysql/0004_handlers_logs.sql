-- Handler-aware routing and execution logs (issue 13).
-- Jobs may name a worker group; workers record the handlers and group their
-- heartbeats announce (NULL handlers: a legacy worker serving every handler).
-- Executions carry the latest progress figure their handler reported, and
-- execution_logs keeps the lines handlers write, bounded per execution by the
-- dispatchers and purged after the retention period.

ALTER TABLE jobs
    ADD COLUMN worker_group VARCHAR(255) NULL;

ALTER TABLE workers
    ADD COLUMN handlers     LONGTEXT     NULL,
    ADD COLUMN worker_group VARCHAR(255) NULL;

ALTER TABLE executions
    ADD COLUMN progress DOUBLE NULL;

CREATE TABLE execution_logs (
    id           BIGINT       NOT NULL AUTO_INCREMENT,
    execution_id VARCHAR(36)  NOT NULL,
    attempt      BIGINT       NOT NULL,
    worker_id    VARCHAR(255) NOT NULL,
    at           BIGINT       NOT NULL,
    level        VARCHAR(8)   NOT NULL,
    message      TEXT         NOT NULL,
    bytes        BIGINT       NOT NULL,
    created_at   BIGINT       NOT NULL,
    PRIMARY KEY (id),
    KEY idx_execution_logs_execution (execution_id, id),
    KEY idx_execution_logs_created (created_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
