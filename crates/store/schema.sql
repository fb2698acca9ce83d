-- leadrelay schema, migration 1.
--
-- Conventions:
-- * ids are TEXT: operator-chosen or generated (`lead_…`, `lreq_…`, `txn_…`, `evt_…`,
--   `scan_…`, with a time-sortable ULID part);
-- * times are INTEGER milliseconds since the Unix epoch, UTC; JSON shows them as ISO 8601;
-- * money is INTEGER minor units (cents); JSON shows it as a number with two decimals;
-- * JSON documents (field definitions, filters, raw bodies, decisions) are TEXT holding JSON;
-- * booleans are INTEGER 0/1.

CREATE TABLE workspaces (
    id                TEXT PRIMARY KEY,
    name              TEXT NOT NULL,
    timezone          TEXT NOT NULL DEFAULT 'UTC',
    -- Evaluator weights of the built-in scorer (JSON object); NULL means the defaults.
    evaluator_weights TEXT,
    created_at        INTEGER NOT NULL
);

-- Channels and lead tables share one table: both are containers of sources with the same
-- delivery settings, and an id names exactly one of them.
CREATE TABLE containers (
    id              TEXT PRIMARY KEY,
    workspace_id    TEXT NOT NULL REFERENCES workspaces(id),
    kind            TEXT NOT NULL CHECK (kind IN ('channel', 'table')),
    name            TEXT NOT NULL,
    auto_delivery   INTEGER NOT NULL CHECK (auto_delivery IN (0, 1)),
    delivery_mode   TEXT NOT NULL DEFAULT 'exclusive' CHECK (delivery_mode IN ('exclusive', 'multi')),
    max_buyers      INTEGER NOT NULL DEFAULT 3 CHECK (max_buyers >= 1),
    score_threshold INTEGER NOT NULL DEFAULT 50 CHECK (score_threshold BETWEEN 0 AND 100),
    created_at      INTEGER NOT NULL
);
CREATE INDEX containers_workspace ON containers(workspace_id);

CREATE TABLE suppliers (
    id           TEXT PRIMARY KEY,
    workspace_id TEXT NOT NULL REFERENCES workspaces(id),
    name         TEXT NOT NULL,
    -- SHA-256 (hex) of the supplier's API key; the key itself is shown once.
    key_hash     TEXT NOT NULL,
    created_at   INTEGER NOT NULL
);
CREATE UNIQUE INDEX suppliers_key_hash ON suppliers(key_hash);

CREATE TABLE sources (
    id                   TEXT PRIMARY KEY,
    container_id         TEXT NOT NULL REFERENCES containers(id),
    name                 TEXT NOT NULL,
    -- SHA-256 (hex) of the ingest secret; NULL when the source takes no secret.
    secret_hash          TEXT,
    supplier_id          TEXT REFERENCES suppliers(id),
    supplier_cost_cents  INTEGER CHECK (supplier_cost_cents >= 0),
    -- Duplicate rule: comma-separated fields ('' = no rule), scope, action, window.
    dedupe_fields        TEXT NOT NULL DEFAULT 'email,phone',
    dedupe_scope         TEXT NOT NULL CHECK (dedupe_scope IN ('channel', 'table', 'workspace')),
    dedupe_action        TEXT NOT NULL DEFAULT 'review' CHECK (dedupe_action IN ('review', 'reject')),
    dedupe_window_days   INTEGER NOT NULL DEFAULT 30 CHECK (dedupe_window_days >= 0),
    -- Partner-native mapping: the draft being edited and the published, live version.
    mapping_draft        TEXT,
    mapping_draft_at     INTEGER,
    mapping_published    TEXT,
    mapping_published_at INTEGER,
    mapping_version      INTEGER NOT NULL DEFAULT 0,
    enabled              INTEGER NOT NULL DEFAULT 1 CHECK (enabled IN (0, 1)),
    created_at           INTEGER NOT NULL
);
CREATE INDEX sources_container ON sources(container_id);

CREATE TABLE products (
    id                          TEXT PRIMARY KEY,
    workspace_id                TEXT NOT NULL REFERENCES workspaces(id),
    slug                        TEXT NOT NULL,
    name                        TEXT NOT NULL,
    -- JSON array of {"name", "required", "allowedValues"?}.
    fields                      TEXT NOT NULL DEFAULT '[]',
    default_supplier_cost_cents INTEGER CHECK (default_supplier_cost_cents >= 0),
    created_at                  INTEGER NOT NULL,
    UNIQUE (workspace_id, slug)
);

CREATE TABLE buyers (
    id                       TEXT PRIMARY KEY,
    workspace_id             TEXT NOT NULL REFERENCES workspaces(id),
    name                     TEXT NOT NULL,
    webhook_url              TEXT NOT NULL,
    -- SHA-256 (hex) of the inbound lifecycle secret; NULL when none is configured.
    secret_hash              TEXT,
    -- Standard Webhooks signing secret (`whsec_…`), kept as is because it signs.
    signing_secret           TEXT NOT NULL,
    -- Comma-separated subset of confirm,payout,cancel.
    capabilities             TEXT NOT NULL DEFAULT 'confirm,payout,cancel',
    cancellation_window_secs INTEGER NOT NULL DEFAULT 259200 CHECK (cancellation_window_secs >= 0),
    auto_payout_pending      INTEGER NOT NULL DEFAULT 0 CHECK (auto_payout_pending IN (0, 1)),
    plan                     TEXT NOT NULL DEFAULT 'postpaid' CHECK (plan IN ('postpaid', 'prepaid')),
    balance_cents            INTEGER NOT NULL DEFAULT 0,
    credit_limit_cents       INTEGER NOT NULL DEFAULT 0 CHECK (credit_limit_cents >= 0),
    status                   TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'paused')),
    -- When the buyer last got a lead; the last tie-breaker of selection.
    last_served_at           INTEGER,
    created_at               INTEGER NOT NULL
);
CREATE INDEX buyers_workspace ON buyers(workspace_id);

CREATE TABLE subscriptions (
    buyer_id    TEXT NOT NULL REFERENCES buyers(id),
    product_id  TEXT NOT NULL REFERENCES products(id),
    price_cents INTEGER NOT NULL CHECK (price_cents >= 0),
    daily_cap   INTEGER CHECK (daily_cap >= 0),
    monthly_cap INTEGER CHECK (monthly_cap >= 0),
    priority    INTEGER NOT NULL DEFAULT 0,
    -- JSON array of {"field", "op": "equals"|"oneOf"|"prefix", "values": [...]}.
    filters     TEXT NOT NULL DEFAULT '[]',
    -- JSON array of windows [{"days": [1..7], "from": "HH:MM", "to": "HH:MM"}] (ISO weekdays,
    -- local time of the workspace, `to` exclusive, earlier than `from` = past midnight), open
    -- when any window is; NULL for always open. See src/autodelivery/schedule.rs.
    schedule    TEXT,
    created_at  INTEGER NOT NULL,
    PRIMARY KEY (buyer_id, product_id)
);
CREATE INDEX subscriptions_product ON subscriptions(product_id);

CREATE TABLE leads (
    id                      TEXT PRIMARY KEY,
    source_id               TEXT NOT NULL REFERENCES sources(id),
    container_id            TEXT NOT NULL REFERENCES containers(id),
    workspace_id            TEXT NOT NULL REFERENCES workspaces(id),
    external_id             TEXT,
    first_name              TEXT NOT NULL,
    last_name               TEXT NOT NULL,
    email                   TEXT,
    phone                   TEXT,
    street                  TEXT,
    house_number            TEXT,
    postal_code             TEXT,
    city                    TEXT,
    country                 TEXT,
    consent_status          TEXT,
    legal_basis             TEXT,
    consent_captured_at     TEXT,
    consent_text_version    TEXT,
    captured_by_external_id TEXT,
    captured_by_name        TEXT,
    captured_by_team        TEXT,
    captured_at             TEXT,
    capture_method          TEXT,
    -- JSON object: the capture object's free-form metadata.
    capture_metadata        TEXT,
    -- JSON object: the Lead's properties beyond the interface's, passed on to buyers.
    additional              TEXT NOT NULL DEFAULT '{}',
    -- Normalised contact keys for duplicate rules (trimmed lower-case email, phone digits).
    email_norm              TEXT,
    phone_norm              TEXT,
    -- CHECKs on columns written per lead compare with OR, not IN: SQLite evaluates an IN
    -- list of three or more through a temporary b-tree on every insert.
    quality_status          TEXT NOT NULL
                            CHECK (quality_status = 'ok' OR quality_status = 'suspect'
                                   OR quality_status = 'invalid'),
    quality_reasons         TEXT NOT NULL DEFAULT '[]',
    duplicate_status        TEXT NOT NULL CHECK (duplicate_status IN ('unique', 'review')),
    duplicate_match         TEXT,
    status                  TEXT NOT NULL DEFAULT 'active'
                            CHECK (status = 'active' OR status = 'cancellation_pending'
                                   OR status = 'cancelled'),
    -- The ingest result item as first answered, so a replay answers the same.
    result                  TEXT,
    created_at              INTEGER NOT NULL
);
CREATE UNIQUE INDEX leads_source_external ON leads(source_id, external_id) WHERE external_id IS NOT NULL;
CREATE INDEX leads_email ON leads(email_norm, created_at) WHERE email_norm IS NOT NULL;
CREATE INDEX leads_phone ON leads(phone_norm, created_at) WHERE phone_norm IS NOT NULL;
CREATE INDEX leads_source_created ON leads(source_id, created_at);

-- The raw request body of each lead (or batch item), kept apart so lead scans stay small.
CREATE TABLE lead_bodies (
    lead_id TEXT PRIMARY KEY REFERENCES leads(id),
    body    TEXT NOT NULL
);

CREATE TABLE lead_requests (
    id                    TEXT PRIMARY KEY,
    lead_id               TEXT NOT NULL REFERENCES leads(id),
    position              INTEGER NOT NULL,
    product_id            TEXT NOT NULL REFERENCES products(id),
    -- NULL when the partner did not say.
    routing_ready         INTEGER CHECK (routing_ready IN (0, 1)),
    trigger_auto_delivery INTEGER NOT NULL DEFAULT 0 CHECK (trigger_auto_delivery IN (0, 1)),
    field_values          TEXT NOT NULL DEFAULT '{}',
    -- OR, not IN: see the note on leads.quality_status.
    status                TEXT NOT NULL DEFAULT 'open'
                          CHECK (status = 'open' OR status = 'delivered' OR status = 'not_delivered'),
    -- JSON: the auto-delivery decision (outcome, reason, evaluation, candidates).
    decision              TEXT,
    created_at            INTEGER NOT NULL
);
CREATE INDEX lead_requests_lead ON lead_requests(lead_id);

CREATE TABLE transactions (
    id                  TEXT PRIMARY KEY,
    lead_request_id     TEXT NOT NULL REFERENCES lead_requests(id),
    lead_id             TEXT NOT NULL REFERENCES leads(id),
    buyer_id            TEXT NOT NULL REFERENCES buyers(id),
    product_id          TEXT NOT NULL REFERENCES products(id),
    workspace_id        TEXT NOT NULL REFERENCES workspaces(id),
    delivery_mode       TEXT NOT NULL CHECK (delivery_mode IN ('exclusive', 'multi')),
    buyer_price_cents   INTEGER NOT NULL,
    supplier_cost_cents INTEGER NOT NULL DEFAULT 0,
    margin_cents        INTEGER NOT NULL,
    -- What a prepaid buyer's balance was charged, so a refund returns exactly that.
    charged_cents       INTEGER NOT NULL DEFAULT 0,
    status              TEXT NOT NULL DEFAULT 'delivered'
                        CHECK (status IN ('delivered', 'acknowledged', 'rejected', 'payout_pending', 'paid', 'cancelled')),
    partner_external_id TEXT,
    delivery_status     TEXT NOT NULL DEFAULT 'pending' CHECK (delivery_status IN ('pending', 'sent', 'failed')),
    created_at          INTEGER NOT NULL,
    updated_at          INTEGER NOT NULL
);
CREATE INDEX transactions_request ON transactions(lead_request_id);
CREATE INDEX transactions_lead ON transactions(lead_id);
CREATE INDEX transactions_buyer_created ON transactions(buyer_id, created_at);
-- The live transactions of a buyer and product by time: auto-delivery's daily and monthly
-- cap counts read only this (covering) index; a rejection or cancellation drops the entry.
CREATE INDEX transactions_live_by_buyer_product ON transactions(buyer_id, product_id, created_at, status)
    WHERE status NOT IN ('rejected', 'cancelled');
CREATE INDEX transactions_partner_external ON transactions(partner_external_id) WHERE partner_external_id IS NOT NULL;

CREATE TABLE transaction_history (
    id             INTEGER PRIMARY KEY,
    transaction_id TEXT NOT NULL REFERENCES transactions(id),
    from_status    TEXT,
    to_status      TEXT NOT NULL,
    actor          TEXT NOT NULL,
    reason         TEXT,
    at             INTEGER NOT NULL
);
CREATE INDEX transaction_history_txn ON transaction_history(transaction_id, id);

-- The outbox: the only queue of outbound events. A row is claimed with a lease; a claim
-- whose lease ran out (a crashed or stuck sender) is taken again.
CREATE TABLE outbox_events (
    id              TEXT PRIMARY KEY,
    kind            TEXT NOT NULL DEFAULT 'lead.delivered',
    transaction_id  TEXT REFERENCES transactions(id),
    buyer_id        TEXT NOT NULL REFERENCES buyers(id),
    url             TEXT NOT NULL,
    payload         TEXT NOT NULL,
    status          TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'failed')),
    -- Attempts made so far; `retry_base` is the count when an operator last retried, so a
    -- retried event starts the retry schedule again.
    attempts        INTEGER NOT NULL DEFAULT 0,
    retry_base      INTEGER NOT NULL DEFAULT 0,
    next_attempt_at INTEGER NOT NULL,
    lease_until     INTEGER,
    -- Incremented by every claim: a sender's outcome only moves the schedule when its claim
    -- is still the latest one.
    claims          INTEGER NOT NULL DEFAULT 0,
    last_error      TEXT,
    created_at      INTEGER NOT NULL,
    delivered_at    INTEGER
);
CREATE INDEX outbox_due ON outbox_events(status, next_attempt_at);
CREATE INDEX outbox_status_created ON outbox_events(status, created_at);
CREATE INDEX outbox_transaction ON outbox_events(transaction_id);

CREATE TABLE outbox_attempts (
    id               INTEGER PRIMARY KEY,
    event_id         TEXT NOT NULL REFERENCES outbox_events(id),
    attempt          INTEGER NOT NULL,
    -- Where it was sent: the buyer's webhook URL at the time of the attempt.
    url              TEXT NOT NULL,
    started_at       INTEGER NOT NULL,
    duration_ms      INTEGER NOT NULL,
    http_status      INTEGER,
    error            TEXT,
    response_excerpt TEXT,
    outcome          TEXT NOT NULL CHECK (outcome IN ('delivered', 'retry', 'failed'))
);
CREATE INDEX outbox_attempts_event ON outbox_attempts(event_id, attempt);

CREATE TABLE supplier_cancellations (
    id              TEXT PRIMARY KEY,
    lead_id         TEXT NOT NULL REFERENCES leads(id),
    supplier_id     TEXT NOT NULL REFERENCES suppliers(id),
    status          TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'acknowledged', 'rejected')),
    origin          TEXT NOT NULL CHECK (origin IN ('auto', 'operator')),
    reason          TEXT,
    response_reason TEXT,
    created_at      INTEGER NOT NULL,
    resolved_at     INTEGER
);
-- A lead has at most one supplier cancellation, ever: a disputed one is not reopened.
CREATE UNIQUE INDEX supplier_cancellations_lead ON supplier_cancellations(lead_id);
