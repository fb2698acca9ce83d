-- leadrelay schema, migration 13: the evaluator's training read in time order again.
--
-- `evaluator train` reads a workspace's transactions by creation time (the latest 20% are
-- the holdout). Migration 3's `transactions_created` served that order; migration 9
-- replaced it with indexes that lead with the status or the buyer, and since then SQLite
-- scanned every transaction and sorted the joined rows, stored features included, in a
-- temporary B-tree. This index gives the order without a sort (and serves the cap
-- counters' rebuild, which reads a workspace's transactions of a time range).
-- BENCHMARKS.md, "Evaluator training", has the plans and figures.

CREATE INDEX transactions_workspace_created ON transactions(workspace_id, created_at);
