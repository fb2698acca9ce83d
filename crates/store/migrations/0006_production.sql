-- Migration 6: running in production (DESIGN.md section 16).

-- The X-Request-Id of the HTTP request that stored the lead request; NULL for rows from
-- before this migration.
ALTER TABLE lead_requests ADD COLUMN request_id TEXT;

-- One row that `GET /api/health` rewrites (at most once a second): a real page write and
-- commit, so a full disk or a read-only file fails the health check, not only the
-- requests. Owned by health.rs.
CREATE TABLE health_probe (
    id        INTEGER PRIMARY KEY CHECK (id = 1),
    probed_at INTEGER NOT NULL,
    probes    INTEGER NOT NULL
);
