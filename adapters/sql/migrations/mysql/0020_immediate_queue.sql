-- Immediate queues (issue 33): whether the worker's heartbeats offer a
-- second dispatch queue for work someone waits for, consumed with a prefetch
-- window of its own. 0: everything goes through its main queue.
ALTER TABLE workers ADD COLUMN immediate_queue BIGINT NOT NULL DEFAULT 0;
