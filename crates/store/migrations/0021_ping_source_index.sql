-- leadrelay schema, migration 21: one index fewer per ping (issue 17, fixed-price ping p99).
--
-- `pings_source_created (source_id, created_at)` had no reader: `ping list --source` walks
-- `pings_created` newest first and tests the source on each row (its statement takes the
-- source as an optional parameter, which no index on the source can serve), the sweep and
-- the lazy freeing walk `pings_accepted_expiry`, a post finds its ping by id, erasure by
-- `pings_lead`/`pings_email`/`pings_phone`, the purge by `pings_unposted`. Each ping wrote
-- an entry, and each group commit of pings a page of it to the WAL.

-- IF EXISTS: running migration 21 again must not fail where the index is already gone (a file
-- turned back into an older schema by hand, as tests/stored_ids.rs does, keeps its schema 21 indexes).
DROP INDEX IF EXISTS pings_source_created;
