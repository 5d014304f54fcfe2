-- Batched dispatch (issue 14): the most dispatches a worker takes in one
-- message, as its heartbeats offer it. NULL: one dispatch per message.
ALTER TABLE workers ADD COLUMN dispatch_batch BIGINT NULL;
