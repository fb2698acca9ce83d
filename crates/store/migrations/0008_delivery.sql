-- leadrelay schema, migration 8: delivery under real conditions (DESIGN.md section 13).

-- Each buyer endpoint's circuit breaker (written by the outbox as it records attempts) and
-- the figures the running server last reported for it. A buyer without a row is healthy
-- and has never been tried.
CREATE TABLE buyer_health (
    buyer_id             TEXT PRIMARY KEY REFERENCES buyers(id),
    state                TEXT NOT NULL DEFAULT 'healthy'
                         CHECK (state = 'healthy' OR state = 'unhealthy'),
    -- Failed attempts in a row, and when the first of them was made (NULL after an answer).
    consecutive_failures INTEGER NOT NULL DEFAULT 0,
    failing_since        INTEGER,
    last_success_at      INTEGER,
    last_failure_at      INTEGER,
    last_error           TEXT,
    -- While unhealthy: since when, when the next probe attempt may go out, and the spacing
    -- that grows from 30 s to 10 min with each failed probe.
    unhealthy_since      INTEGER,
    next_probe_at        INTEGER,
    probe_interval_ms    INTEGER,
    -- The running server's figures (`buyer health`): sends in flight, and the median and
    -- 99th percentile duration of its recent attempts, as of `reported_at`.
    in_flight            INTEGER NOT NULL DEFAULT 0,
    latency_p50_ms       INTEGER,
    latency_p99_ms       INTEGER,
    reported_at          INTEGER
) WITHOUT ROWID;

-- The outbox workers of the running server say they are alive here every few seconds, so
-- a command in another process knows whether `buyer_health`'s figures are current.
CREATE TABLE outbox_workers (
    id           INTEGER PRIMARY KEY CHECK (id = 1),
    started_at   INTEGER NOT NULL,
    heartbeat_at INTEGER NOT NULL
);

-- Claiming goes buyer by buyer (fair across buyers), each buyer's pending events by due
-- time. A claim moves `next_attempt_at` to the end of its lease, so an event in flight is
-- not due, and one whose sender died is due again when its lease runs out.
CREATE INDEX outbox_buyer_due ON outbox_events(buyer_id, next_attempt_at) WHERE status = 'pending';
DROP INDEX outbox_due;
UPDATE outbox_events SET next_attempt_at = lease_until
WHERE status = 'pending' AND lease_until > next_attempt_at;

-- Cap use per buyer and product in the current local day and month of the workspace
-- (`caps`): delivered and still live (`count`), and held by a reservation (`held`). Each
-- window is named by its start (ms UTC); a row whose window has passed counts as 0.
-- Filled from the live transactions of the current windows right after this migration.
CREATE TABLE cap_usage (
    buyer_id    TEXT NOT NULL REFERENCES buyers(id),
    product_id  TEXT NOT NULL REFERENCES products(id),
    day_start   INTEGER NOT NULL,
    day_count   INTEGER NOT NULL DEFAULT 0,
    day_held    INTEGER NOT NULL DEFAULT 0,
    month_start INTEGER NOT NULL,
    month_count INTEGER NOT NULL DEFAULT 0,
    month_held  INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (buyer_id, product_id)
) WITHOUT ROWID;

-- Caps no longer count transactions: the index that served the count goes.
DROP INDEX transactions_live_by_buyer_product;
