-- leadrelay schema, migration 19: the report aggregate rolled up per UTC day (issue 19),
-- owned by src/report/.
--
-- `report_days` holds what `report_buckets` holds, summed per workspace × UTC day (`day`:
-- its start, ms UTC) × source × buyer × product: some 30 rows a day where the quarter
-- hours have some 30 rows each. A report reads the whole UTC days of its range (and of
-- each of its periods) here and the quarter hours at their edges from `report_buckets`,
-- so a local day that starts mid-UTC-day is still cut at its own midnight. The writer
-- moves a row here by the same difference, in the same statement batch, as the quarter
-- hour it moves (`report::buckets::add`); `check` compares the two.
CREATE TABLE report_days (
    workspace_id        TEXT NOT NULL REFERENCES workspaces(id),
    day                 INTEGER NOT NULL,
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
    PRIMARY KEY (workspace_id, day, source_id, buyer_id, product_id)
) WITHOUT ROWID;

-- The foreign key's lookup when a source is deleted.
CREATE INDEX report_days_source ON report_days(source_id);

-- Existing files: the quarter hours summed per UTC day.
INSERT INTO report_days (workspace_id, day, source_id, buyer_id, product_id, received,
    accepted, duplicates, rejected, dropped, sold, acknowledged, returned, paid,
    revenue_cents, supplier_cost_cents)
SELECT workspace_id, (bucket / 86400000) * 86400000 - (bucket % 86400000 < 0) * 86400000,
       source_id, buyer_id, product_id, sum(received), sum(accepted), sum(duplicates),
       sum(rejected), sum(dropped), sum(sold), sum(acknowledged), sum(returned), sum(paid),
       sum(revenue_cents), sum(supplier_cost_cents)
FROM report_buckets
GROUP BY 1, 2, 3, 4, 5;
