-- leadrelay schema, migration 23: returns (DESIGN.md section 19). A buyer's cancellation is
-- a return: it names a reason code of the workspace's list, counts against the buyer's
-- return cap, and under manual review waits in `return_requested` for the operator.

-- The transaction state `return_requested`: only the CHECK's text changes (as in migration
-- 22, through `sqlite_schema`; the step in Rust moves the schema version on and reads the
-- table once). Every stored row already satisfies the wider CHECK.
PRAGMA writable_schema = ON;

UPDATE sqlite_schema SET sql = replace(sql,
    'OR status = ''cancelled'')',
    'OR status = ''cancelled'' OR status = ''return_requested'')')
WHERE type = 'table' AND name = 'transactions';

PRAGMA writable_schema = RESET;

-- A workspace's reason codes. They go with their workspace: a workspace without history is
-- still deleted, not archived.
CREATE TABLE IF NOT EXISTS return_reasons (
    workspace_id TEXT NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
    code         TEXT NOT NULL,
    label        TEXT NOT NULL,
    created_at   INTEGER NOT NULL,
    PRIMARY KEY (workspace_id, code)
) WITHOUT ROWID;

-- Every workspace there is starts with the six codes a new workspace gets
-- (`config::return_reason::DEFAULTS`; tests/returns.rs keeps the two lists the same), as
-- of its own creation.
INSERT OR IGNORE INTO return_reasons (workspace_id, code, label, created_at)
SELECT w.id, d.column1, d.column2, w.created_at
FROM workspaces w,
     (VALUES ('wrong_contact', 'Wrong contact details'),
             ('duplicate', 'Duplicate lead'),
             ('not_interested', 'Not interested'),
             ('fake', 'Fake or test lead'),
             ('out_of_area', 'Out of the service area'),
             ('other', 'Other')) d;

-- A buyer's return policy (`buyers.return_cap_bp`, `buyers.return_review`) is added by the
-- step in Rust, which adds a column only where it is missing: SQLite's ADD COLUMN has no
-- IF NOT EXISTS, and this file must run again harmlessly, as every migration here does.

-- One return per transaction, ever: a denied one is not asked again, an approved one ended
-- the sale. `previous_status` is where a denial puts the transaction back.
CREATE TABLE IF NOT EXISTS returns (
    transaction_id  TEXT PRIMARY KEY REFERENCES transactions(id),
    workspace_id    TEXT NOT NULL REFERENCES workspaces(id),
    buyer_id        TEXT NOT NULL REFERENCES buyers(id),
    reason_code     TEXT NOT NULL,
    reason          TEXT,
    status          TEXT NOT NULL
                    CHECK (status = 'pending' OR status = 'approved' OR status = 'denied'),
    previous_status TEXT NOT NULL,
    requested_by    TEXT NOT NULL,
    requested_at    INTEGER NOT NULL,
    decided_by      TEXT,
    decided_at      INTEGER,
    note            TEXT
);
-- The return cap counts a buyer's returns of the month.
CREATE INDEX IF NOT EXISTS returns_buyer_requested ON returns(buyer_id, requested_at);
-- The review queue and `report --by reason` read a workspace's returns by time.
CREATE INDEX IF NOT EXISTS returns_workspace_requested ON returns(workspace_id, requested_at);
