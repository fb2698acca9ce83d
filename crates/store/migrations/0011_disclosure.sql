-- leadrelay schema, migration 11: what a source's ingest answer discloses (DESIGN.md
-- section 5, amended). `summary` (the default, also for every existing source) answers the
-- partner with each request's outcome and reason only: no buyer ids, prices, transaction
-- ids, scores, factors, candidates, nor another lead's id in `duplicateMatch`. `full` is
-- the whole trace, for sources the operator runs itself. The stored decisions stay whole
-- either way; an answer is cut to the source's current setting when it is sent (also a
-- replay), and `lead show` shows all of it.

ALTER TABLE sources ADD COLUMN result_detail TEXT NOT NULL DEFAULT 'summary'
    CHECK (result_detail IN ('summary', 'full'));
