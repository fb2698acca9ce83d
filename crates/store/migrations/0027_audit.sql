-- Migration 27: accountability (DESIGN.md section 23): operator roles and the audit log.
--
-- Operators made before roles existed keep every right: their role is `admin`.
ALTER TABLE operators ADD COLUMN role TEXT NOT NULL DEFAULT 'admin'
    CHECK (role = 'admin' OR role = 'finance' OR role = 'support' OR role = 'viewer');

-- Every change of configuration or money, appended in the job that makes the change. Each
-- entry's `hash` is SHA-256 over the previous entry's hash and this entry's fields, so an
-- edited, removed or reordered entry breaks the chain that `leadrelay check` walks.
CREATE TABLE audit_log (
    seq       INTEGER PRIMARY KEY,
    at        INTEGER NOT NULL,
    actor     TEXT NOT NULL,
    action    TEXT NOT NULL,
    object_id TEXT NOT NULL,
    -- JSON object: field -> {"old", "new"}; a secret appears as "rotated", never its value.
    changes   TEXT NOT NULL,
    prev_hash TEXT NOT NULL,
    hash      TEXT NOT NULL
);
CREATE INDEX audit_log_object ON audit_log(object_id, seq);

-- Append-only for every program that goes through SQLite's triggers: no command edits or
-- deletes an entry, and an attempt is an error rather than a silent rewrite.
CREATE TRIGGER audit_log_no_update BEFORE UPDATE ON audit_log
BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
CREATE TRIGGER audit_log_no_delete BEFORE DELETE ON audit_log
BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
