-- The buyer and supplier portal: partner users (each belongs to exactly one buyer or one
-- supplier) and their sessions. Tokens and session ids are stored as SHA-256 only.
CREATE TABLE IF NOT EXISTS partner_users (
    id            TEXT PRIMARY KEY,
    buyer_id      TEXT REFERENCES buyers(id),
    supplier_id   TEXT REFERENCES suppliers(id),
    name          TEXT NOT NULL,
    token_hash    TEXT NOT NULL,
    created_at    INTEGER NOT NULL,
    revoked_at    INTEGER,
    last_login_at INTEGER,
    CHECK ((buyer_id IS NULL) <> (supplier_id IS NULL))
);
CREATE UNIQUE INDEX IF NOT EXISTS partner_users_token_hash ON partner_users(token_hash);
CREATE INDEX IF NOT EXISTS partner_users_buyer ON partner_users(buyer_id) WHERE buyer_id IS NOT NULL;
CREATE INDEX IF NOT EXISTS partner_users_supplier ON partner_users(supplier_id) WHERE supplier_id IS NOT NULL;

CREATE TABLE IF NOT EXISTS partner_sessions (
    id_hash    TEXT PRIMARY KEY,
    user_id    TEXT NOT NULL REFERENCES partner_users(id),
    created_at INTEGER NOT NULL,
    expires_at INTEGER NOT NULL
) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS partner_sessions_user ON partner_sessions(user_id);

