-- Mirrors migrations/mysql/0006_trace_context.sql: the caller's W3C trace
-- context (JSON), NULL when none was sent.

ALTER TABLE jobs ADD COLUMN trace_context TEXT NULL;
