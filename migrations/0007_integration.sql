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

-- The request a mapped integration's attempt sent, secrets masked (JSON).
ALTER TABLE outbox_attempts ADD COLUMN request TEXT;
