-- The W3C trace context a caller sent with a create (issue 15): JSON
-- `{"traceparent": "…", "tracestate": "…"}`, NULL when none was sent. Every
-- execution of the job joins that trace (dispatch, run, apply, callback).
-- At most a 55-byte traceparent and a 512-byte tracestate, plus the JSON.

ALTER TABLE jobs ADD COLUMN trace_context VARCHAR(1024) COLLATE "C" NULL;
