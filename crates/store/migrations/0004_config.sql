-- leadrelay schema, migration 4: day-two configuration (DESIGN.md section 10).
--
-- Retiring: a configuration record with history (leads, transactions, ledger rows) is
-- archived instead of deleted: `archived_at` is set, the row stays (so its id is never
-- reused and its history keeps its references), it is hidden from `list` and takes no
-- traffic. NULL means live.
--
-- Rotation with overlap: the previous secret's hash (the signing secret itself, which must
-- sign) and the instant (ms) until which it is still accepted. NULL when there is none; a
-- rotation without overlap clears them. Only one previous secret is kept: rotating again
-- during an overlap ends the older one at once.

ALTER TABLE workspaces ADD COLUMN archived_at INTEGER;
ALTER TABLE containers ADD COLUMN archived_at INTEGER;
ALTER TABLE products ADD COLUMN archived_at INTEGER;

ALTER TABLE sources ADD COLUMN archived_at INTEGER;
ALTER TABLE sources ADD COLUMN previous_secret_hash TEXT;
ALTER TABLE sources ADD COLUMN previous_secret_valid_until INTEGER;

ALTER TABLE buyers ADD COLUMN archived_at INTEGER;
ALTER TABLE buyers ADD COLUMN previous_secret_hash TEXT;
ALTER TABLE buyers ADD COLUMN previous_secret_valid_until INTEGER;
ALTER TABLE buyers ADD COLUMN previous_signing_secret TEXT;
ALTER TABLE buyers ADD COLUMN previous_signing_valid_until INTEGER;

ALTER TABLE suppliers ADD COLUMN archived_at INTEGER;
ALTER TABLE suppliers ADD COLUMN previous_key_hash TEXT;
ALTER TABLE suppliers ADD COLUMN previous_key_valid_until INTEGER;
-- The supplier endpoint finds a supplier by the hash of the presented key: the current one
-- (`suppliers_key_hash`) or, during an overlap, the previous one.
CREATE INDEX suppliers_previous_key_hash ON suppliers(previous_key_hash)
    WHERE previous_key_hash IS NOT NULL;
