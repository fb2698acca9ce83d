-- leadrelay schema, migration 12: ping/post and bids (DESIGN.md section 14).

-- How long an accepted ping holds its reservation (ms); `--ping-ttl` on channels and tables.
ALTER TABLE containers ADD COLUMN ping_ttl_ms INTEGER NOT NULL DEFAULT 120000;
-- A ping's payout as a share of the winning price, in hundredths of a percent (4000 = 40%);
-- NULL: the payout is the supplier cost (`--revenue-share`).
ALTER TABLE sources ADD COLUMN revenue_share_bp INTEGER;
-- What live reservations hold of a prepaid buyer's balance (cents). Owned by `ledger` with
-- `balance_cents`: not a money move, so no ledger row; what is available to a delivery or
-- another ping is balance + credit limit - held.
ALTER TABLE buyers ADD COLUMN held_cents INTEGER NOT NULL DEFAULT 0;
-- Pricing of a subscription: `fixed` (price_cents) or `bid` (asked per lead at bid_url,
-- answered within bid_timeout_ms, a bid outside [min, max] ignored).
ALTER TABLE subscriptions ADD COLUMN pricing TEXT NOT NULL DEFAULT 'fixed'
    CHECK (pricing IN ('fixed', 'bid'));
ALTER TABLE subscriptions ADD COLUMN bid_url TEXT;
ALTER TABLE subscriptions ADD COLUMN bid_timeout_ms INTEGER;
ALTER TABLE subscriptions ADD COLUMN min_price_cents INTEGER;
ALTER TABLE subscriptions ADD COLUMN max_price_cents INTEGER;

-- Every ping (`ping`), accepted or rejected. No personal data: the partner may only send
-- hashes of email and phone. `status`: accepted (reservations held until expires_at),
-- rejected, posted (the lead came and was delivered), expired (nothing came in time),
-- released (the post failed validation, duplicates or quality; its reservations freed).
CREATE TABLE pings (
    id            TEXT PRIMARY KEY,
    source_id     TEXT NOT NULL REFERENCES sources(id),
    container_id  TEXT NOT NULL,
    workspace_id  TEXT NOT NULL,
    product_id    TEXT NOT NULL,
    external_id   TEXT,
    email_sha256  TEXT,
    phone_sha256  TEXT,
    body          TEXT NOT NULL,
    status        TEXT NOT NULL,
    reason        TEXT,
    payout_cents  INTEGER,
    decision      TEXT,
    lead_id       TEXT,
    created_at    INTEGER NOT NULL,
    expires_at    INTEGER,
    ended_at      INTEGER
);
-- The sweep and the lazy freeing find lapsed reservations on this.
CREATE INDEX pings_accepted_expiry ON pings(expires_at) WHERE status = 'accepted';
CREATE INDEX pings_source_created ON pings(source_id, created_at);
CREATE INDEX pings_created ON pings(created_at);

-- What an accepted ping holds: per winning buyer the price, and the prepaid balance held.
-- `cap_day_start`/`cap_month_start` name the cap windows the place was held in.
CREATE TABLE ping_reservations (
    ping_id         TEXT NOT NULL REFERENCES pings(id),
    position        INTEGER NOT NULL,
    buyer_id        TEXT NOT NULL REFERENCES buyers(id),
    product_id      TEXT NOT NULL,
    price_cents     INTEGER NOT NULL,
    held_cents      INTEGER NOT NULL,
    cap_day_start   INTEGER NOT NULL,
    cap_month_start INTEGER NOT NULL,
    bid_request_id  TEXT,
    bid_id          TEXT,
    PRIMARY KEY (ping_id, position)
) WITHOUT ROWID;

-- Every bid request sent to a bid-priced buyer, with its outcome and latency (`bids`):
-- for a ping (ping_id) or for an auto-delivered lead request (lead_request_id).
CREATE TABLE bids (
    id              TEXT PRIMARY KEY,
    ping_id         TEXT,
    lead_request_id TEXT,
    buyer_id        TEXT NOT NULL REFERENCES buyers(id),
    outcome         TEXT NOT NULL,
    price_cents     INTEGER,
    bid_id          TEXT,
    latency_ms      INTEGER NOT NULL,
    error           TEXT,
    won             INTEGER NOT NULL DEFAULT 0,
    created_at      INTEGER NOT NULL
);
CREATE INDEX bids_ping ON bids(ping_id) WHERE ping_id IS NOT NULL;
CREATE INDEX bids_request ON bids(lead_request_id) WHERE lead_request_id IS NOT NULL;

-- A transaction sold by a winning bid names it, as its `lead.delivered` event does.
ALTER TABLE transactions ADD COLUMN bid_request_id TEXT;
ALTER TABLE transactions ADD COLUMN bid_id TEXT;
