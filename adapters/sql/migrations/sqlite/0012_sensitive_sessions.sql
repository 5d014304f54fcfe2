-- Issue 35. A job may name params paths shown masked to people who only
-- look (beyond the configured key names): a JSON array of paths, NULL for
-- none.
ALTER TABLE jobs ADD COLUMN sensitive_params TEXT NULL;

-- Dashboard sessions live in the database, so every API instance serves
-- them and a restart logs nobody out. Only the hash of the cookie's id is
-- kept, with the prefix of the key the session acts as (never the key).
CREATE TABLE ui_sessions (
    id_hash    TEXT    NOT NULL PRIMARY KEY,
    key_prefix TEXT    NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
);
CREATE INDEX idx_ui_sessions_expires ON ui_sessions (expires_at);
