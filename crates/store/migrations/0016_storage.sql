-- leadrelay schema, migration 16: one index fewer per lead (issue 15, storage per lead).
--
-- `leads_source_created (source_id, created_at)` served two readers: `lead list --source`
-- (newest first) and the purge's walk of a source's leads in creation order. Migration 9's
-- `leads_source_mix (source_id, quality_status, duplicate_status, created_at)` holds the
-- same leads in one creation-ordered range per (quality, duplicate) pair, and both
-- statuses are written once, at ingest: the two readers now walk those six ranges
-- (`ingest::view::stored_statuses`). 24 bytes per lead (BENCHMARKS.md, Storage per lead).

DROP INDEX leads_source_created;
