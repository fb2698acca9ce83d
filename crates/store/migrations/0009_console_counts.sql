-- Migration 9: the console's counts by group (DESIGN.md section 15: every page under
-- 100 ms on a file of a million leads).
--
-- Migration 3's indexes led with the time, so a figure per source or per buyer over 30
-- days read every row of the range, evaluated a filter on each and sorted them by group
-- (seconds on a million leads). These lead with the groups and end with the time: each
-- figure is the count of one range of an index (one per source, quality and duplicate
-- status; per buyer and transaction status; per transaction status and day), with no
-- table lookup, no filter per row and no sort. BENCHMARKS.md, "Operator console", has the
-- figures and what the indexes cost ingest.

-- The sources page: volume, duplicates and quality mix per source, 30 days and today.
CREATE INDEX leads_source_mix ON leads(source_id, quality_status, duplicate_status, created_at);

-- Leads per hour and per day (the overview) now need only the time: the narrower index
-- costs each stored lead less.
DROP INDEX leads_created;
CREATE INDEX leads_created ON leads(created_at);

-- The buyers page: transactions per buyer and status over 30 days (acceptance and return
-- rates).
CREATE INDEX transactions_buyer_status ON transactions(buyer_id, status, created_at);

-- The overview: sales, revenue and margin per status and day over 30 days.
DROP INDEX transactions_created;
CREATE INDEX transactions_status_created
    ON transactions(status, created_at, buyer_price_cents, margin_cents);
