-- Issue 35. A job may name params paths shown masked to people who only
-- look (beyond the configured key names): a JSON array of paths, NULL for
-- none.
ALTER TABLE jobs ADD COLUMN sensitive_params JSON NULL;

-- Dashboard sessions live in the database, so every API instance serves
-- them and a restart logs nobody out. Only the hash of the cookie's id is
-- kept, with the prefix of the key the session acts as (never the key).
CREATE TABLE ui_sessions (
    id_hash    VARCHAR(64) NOT NULL,
    key_prefix VARCHAR(32) NOT NULL,
    created_at DATETIME(3) NOT NULL,
    expires_at DATETIME(3) NOT NULL,
    PRIMARY KEY (id_hash),
    KEY idx_ui_sessions_expires (expires_at)
) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4 COLLATE = utf8mb4_bin;
