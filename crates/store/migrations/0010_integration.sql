-- Buyer-native delivery and the waterfall (DESIGN.md section 18).

-- A buyer's integration document (checked JSON); NULL is the generic signed webhook.
ALTER TABLE buyers ADD COLUMN integration TEXT;

-- Named secrets a buyer's integration sends in its headers. Kept in clear like the signing
-- secret (they must be sent); the file is 0600 and no command prints them.
CREATE TABLE buyer_integration_secrets (
    buyer_id TEXT NOT NULL REFERENCES buyers(id) ON DELETE CASCADE,
    name TEXT NOT NULL,
    value TEXT NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (buyer_id, name)
) WITHOUT ROWID;

-- The waterfall of a channel or lead table: on or off, and its bound.
ALTER TABLE containers ADD COLUMN waterfall INTEGER NOT NULL DEFAULT 1;
ALTER TABLE containers ADD COLUMN waterfall_max INTEGER NOT NULL DEFAULT 5;

-- Attempts gain the outcome `refused` (a buyer's API refused the lead) and the request a
-- mapped integration's attempt sent, secrets masked (JSON). SQLite cannot change a CHECK,
-- so the table is rebuilt with its rows and index.
CREATE TABLE outbox_attempts_new (
    id               INTEGER PRIMARY KEY,
    event_id         TEXT NOT NULL REFERENCES outbox_events(id),
    attempt          INTEGER NOT NULL,
    -- Where it was sent: the buyer's webhook URL (or its integration's) at the time.
    url              TEXT NOT NULL,
    started_at       INTEGER NOT NULL,
    duration_ms      INTEGER NOT NULL,
    http_status      INTEGER,
    error            TEXT,
    response_excerpt TEXT,
    outcome          TEXT NOT NULL
                     CHECK (outcome IN ('delivered', 'retry', 'failed', 'refused')),
    request          TEXT
);
INSERT INTO outbox_attempts_new (id, event_id, attempt, url, started_at, duration_ms,
    http_status, error, response_excerpt, outcome)
SELECT id, event_id, attempt, url, started_at, duration_ms, http_status, error,
    response_excerpt, outcome
FROM outbox_attempts;
DROP TABLE outbox_attempts;
ALTER TABLE outbox_attempts_new RENAME TO outbox_attempts;
CREATE INDEX outbox_attempts_event ON outbox_attempts(event_id, attempt);
