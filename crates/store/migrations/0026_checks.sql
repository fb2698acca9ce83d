-- leadrelay schema, migration 26: third-party check steps (DESIGN.md section 22).
--
-- IF NOT EXISTS: running the migration again (a file turned back to an older schema
-- version) must not fail.

-- One step per name: the checked document as JSON text, in one workspace.
CREATE TABLE IF NOT EXISTS check_steps (
    name         TEXT PRIMARY KEY,
    workspace_id TEXT NOT NULL REFERENCES workspaces(id),
    document     TEXT NOT NULL,
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL
) WITHOUT ROWID;

CREATE INDEX IF NOT EXISTS check_steps_workspace ON check_steps (workspace_id, name);

-- Named values a step's headers send; kept in clear like buyer integration secrets (they
-- are sent as they are), never printed once stored.
CREATE TABLE IF NOT EXISTS check_step_secrets (
    step_name  TEXT NOT NULL REFERENCES check_steps(name) ON DELETE CASCADE,
    name       TEXT NOT NULL,
    value      TEXT NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (step_name, name)
) WITHOUT ROWID;

-- `leads.checks` (the outcomes, JSON) and `subscriptions.require_check` are added by the
-- migration's Rust step (`db::migrate::checks_added`), only where missing.
