-- leadrelay schema, migration 7: what a source's ingest answer discloses (DESIGN.md
-- section 5, amended). `summary` (the default, also for every existing source) answers the
-- partner with each request's outcome and reason only: no buyer ids, prices, transaction
-- ids, scores, factors, candidates, nor another lead's id in `duplicateMatch`. `full` is
-- the whole trace, for sources the operator runs itself. `leads.result` keeps the full
-- answer either way; it is cut to the source's current setting when it is sent (also on a
-- replay), and `lead show` shows all of it.

ALTER TABLE sources ADD COLUMN result_detail TEXT NOT NULL DEFAULT 'summary'
    CHECK (result_detail IN ('summary', 'full'));
