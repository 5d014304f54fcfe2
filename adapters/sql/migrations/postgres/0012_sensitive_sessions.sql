-- Issue 35. A job may name params paths shown masked to people who only
-- look (beyond the configured key names): a JSON array of paths, NULL for
-- none.
ALTER TABLE jobs ADD COLUMN sensitive_params JSONB NULL;

-- Dashboard sessions live in the database, so every API instance serves
-- them and a restart logs nobody out. Only the hash of the cookie's id is
-- kept, with the prefix of the key the session acts as (never the key).
CREATE TABLE ui_sessions (
    id_hash    VARCHAR(64) COLLATE "C" NOT NULL,
    key_prefix VARCHAR(32) COLLATE "C" NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL,
    CONSTRAINT pk_ui_sessions PRIMARY KEY (id_hash)
);
CREATE INDEX idx_ui_sessions_expires ON ui_sessions (expires_at);
