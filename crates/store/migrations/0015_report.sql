-- leadrelay schema, migration 15: the report aggregate (DESIGN.md section 11), owned by
-- src/report/.
--
-- One row per workspace × quarter hour (`bucket`: its start, ms UTC) × source × buyer ×
-- product. Quarter hours because every time zone's offset is a multiple of 15 minutes, so
-- a bucket never straddles a local midnight and a report cuts the buckets into the
-- workspace's days, weeks and months when it reads them.
-- Lead rows have buyer '': a lead counts on the quarter hour it was received, under its
-- source and the product of its first interest ('' when it has none or failed validation).
-- Transaction rows count on the quarter hour the transaction was delivered, under its
-- lead's source, its buyer and its product.
-- `dropped` counts the leads that were received but not stored (failed validation, or a
-- duplicate under a `reject` rule), so that `check` can recount the rest from the leads.
-- The writer moves a row in the same job as the change it counts.
CREATE TABLE report_buckets (
    workspace_id        TEXT NOT NULL REFERENCES workspaces(id),
    bucket              INTEGER NOT NULL,
    source_id           TEXT NOT NULL REFERENCES sources(id),
    buyer_id            TEXT NOT NULL,
    product_id          TEXT NOT NULL,
    received            INTEGER NOT NULL DEFAULT 0,
    accepted            INTEGER NOT NULL DEFAULT 0,
    duplicates          INTEGER NOT NULL DEFAULT 0,
    rejected            INTEGER NOT NULL DEFAULT 0,
    dropped             INTEGER NOT NULL DEFAULT 0,
    sold                INTEGER NOT NULL DEFAULT 0,
    acknowledged        INTEGER NOT NULL DEFAULT 0,
    returned            INTEGER NOT NULL DEFAULT 0,
    paid                INTEGER NOT NULL DEFAULT 0,
    revenue_cents       INTEGER NOT NULL DEFAULT 0,
    supplier_cost_cents INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (workspace_id, bucket, source_id, buyer_id, product_id)
) WITHOUT ROWID;

-- The foreign key's lookup when a source is deleted (`source delete` archives a source
-- that has rows here).
CREATE INDEX report_buckets_source ON report_buckets(source_id);

-- Existing files: the rows of their stored leads and transactions. Leads that failed
-- validation or were rejected as duplicates were never stored, so an existing file starts
-- with none of them.
INSERT INTO report_buckets (workspace_id, bucket, source_id, buyer_id, product_id,
    received, accepted, duplicates)
SELECT l.workspace_id, (l.created_at / 900000) * 900000, l.source_id, '',
       coalesce((SELECT r.product_id FROM lead_requests r WHERE r.lead_id = l.id
                 ORDER BY r.position LIMIT 1), ''),
       count(*), sum(l.duplicate_status = 'unique'), sum(l.duplicate_status <> 'unique')
FROM leads l
GROUP BY 1, 2, 3, 4, 5;

INSERT INTO report_buckets (workspace_id, bucket, source_id, buyer_id, product_id,
    sold, acknowledged, returned, paid, revenue_cents, supplier_cost_cents)
SELECT t.workspace_id, (t.created_at / 900000) * 900000, l.source_id, t.buyer_id,
       t.product_id, count(*),
       sum(t.status IN ('acknowledged', 'payout_pending', 'paid')),
       sum(t.status IN ('rejected', 'cancelled')),
       sum(t.status = 'paid'),
       sum(CASE WHEN t.status IN ('rejected', 'cancelled') THEN 0 ELSE t.buyer_price_cents END),
       sum(CASE WHEN t.status IN ('rejected', 'cancelled') THEN 0
           ELSE t.supplier_cost_cents END)
FROM transactions t JOIN leads l ON l.id = t.lead_id
GROUP BY 1, 2, 3, 4, 5;
