-- leadrelay schema, migration 28: alerts (DESIGN.md section 23).
--
-- Where a workspace's alerts go, which conditions it watches, and each alert's life: one row
-- per episode of a condition, `firing` from when it starts and `resolved` when it ends. IF
-- NOT EXISTS: running the migration again (a file turned back to an older schema version)
-- must not fail.

-- A webhook (`address` is its URL; `signing_secret` the `whsec_…` that signs each message,
-- kept as is because it signs, like a buyer's) or an email address.
CREATE TABLE IF NOT EXISTS alert_targets (
    id             TEXT PRIMARY KEY,
    workspace_id   TEXT NOT NULL REFERENCES workspaces(id),
    kind           TEXT NOT NULL CHECK (kind = 'webhook' OR kind = 'email'),
    address        TEXT NOT NULL,
    signing_secret TEXT,
    created_at     INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS alert_targets_workspace ON alert_targets(workspace_id);

-- A rule switched on for a workspace. `threshold`: cents for balance_low, basis points
-- (1/100 of a percent) for disk_low and return_rate_high; `for_ms`: how long a condition
-- must hold (buyer_endpoint_down, source_silent, outbox_backlog).
CREATE TABLE IF NOT EXISTS alert_rules (
    workspace_id TEXT NOT NULL REFERENCES workspaces(id),
    rule         TEXT NOT NULL,
    threshold    INTEGER,
    for_ms       INTEGER,
    updated_at   INTEGER NOT NULL,
    PRIMARY KEY (workspace_id, rule)
) WITHOUT ROWID;

-- One alert: a rule's condition for one subject (a buyer, a source, the outbox, the disk).
CREATE TABLE IF NOT EXISTS alerts (
    id           TEXT PRIMARY KEY,
    workspace_id TEXT NOT NULL REFERENCES workspaces(id),
    rule         TEXT NOT NULL,
    subject      TEXT NOT NULL,
    state        TEXT NOT NULL CHECK (state = 'firing' OR state = 'resolved'),
    detail       TEXT NOT NULL,
    since        INTEGER NOT NULL,
    resolved_at  INTEGER
);
-- At most one open alert per condition, and the open ones found without a scan.
CREATE UNIQUE INDEX IF NOT EXISTS alerts_open ON alerts(workspace_id, rule, subject)
    WHERE state = 'firing';
CREATE INDEX IF NOT EXISTS alerts_since ON alerts(since);
