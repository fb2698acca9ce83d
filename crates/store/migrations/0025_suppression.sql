-- leadrelay schema, migration 25: suppression lists (DESIGN.md section 22).
--
-- A list holds keyed hashes only: HMAC-SHA-256, under a random key per workspace, of the
-- SHA-256 of the email or phone normalised as the duplicate rule does. Neither table holds
-- a readable value, so a copy of the file leaks no suppressed contact. IF NOT EXISTS: running
-- the migration again (a file turned back to an older schema version) must not fail.

-- The workspace's key, made when its list is first written.
CREATE TABLE IF NOT EXISTS suppression_keys (
    workspace_id TEXT PRIMARY KEY REFERENCES workspaces(id),
    hmac_key     BLOB NOT NULL,
    created_at   INTEGER NOT NULL
) WITHOUT ROWID;

-- One entry per suppressed contact; `digest` is the keyed hash (32 bytes).
CREATE TABLE IF NOT EXISTS suppressions (
    workspace_id TEXT NOT NULL REFERENCES workspaces(id),
    digest       BLOB NOT NULL,
    kind         TEXT NOT NULL CHECK (kind = 'email' OR kind = 'phone'),
    reason       TEXT,
    added_at     INTEGER NOT NULL,
    PRIMARY KEY (workspace_id, digest)
) WITHOUT ROWID;

-- The workspace's `suppression_action` (reject or flag) is added by the migration's Rust
-- step (`db::migrate::suppression_added`), only where it is missing.
