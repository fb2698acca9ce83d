-- Migration 3: the operator console (DESIGN.md section 15).
--
-- Operators sign in to the console with a token that `leadrelay operator create` prints
-- once; only its SHA-256 is kept. A login opens a session whose random id travels in a
-- cookie; only the id's SHA-256 is kept here, so a copy of the file opens no session.
-- Revoking an operator deletes its sessions in the same job.

CREATE TABLE operators (
    id            TEXT PRIMARY KEY,
    name          TEXT NOT NULL,
    -- SHA-256 (hex) of the operator's console token.
    token_hash    TEXT NOT NULL,
    created_at    INTEGER NOT NULL,
    revoked_at    INTEGER,
    last_login_at INTEGER
);
CREATE UNIQUE INDEX operators_token_hash ON operators(token_hash);

CREATE TABLE operator_sessions (
    -- SHA-256 (hex) of the session id in the operator's cookie.
    id_hash     TEXT PRIMARY KEY,
    operator_id TEXT NOT NULL REFERENCES operators(id),
    created_at  INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX operator_sessions_operator ON operator_sessions(operator_id);

-- The console's lead figures read only this index: leads per hour over 48 hours, today's
-- and yesterday's count (the overview) and each source's volume, duplicates and quality
-- mix over 30 days (the sources page); without it each is a scan of every lead.
CREATE INDEX leads_created ON leads(created_at, source_id, quality_status, duplicate_status);

-- The console's figures over time read only this index: revenue, margin, sales and
-- returns per day over 30 days (the overview) and per buyer over 30 days (acceptance and
-- return rates on the buyers page), each a range of it in time order.
CREATE INDEX transactions_created
    ON transactions(created_at, buyer_id, status, buyer_price_cents, margin_cents);
