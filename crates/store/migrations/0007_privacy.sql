-- leadrelay schema, migration 7: data lifecycle and privacy (DESIGN.md section 12), and
-- storage per lead.
--
-- Storage: a lead's raw body moves into its row as `leads.body`, compressed against the
-- lead's own columns (src/ingest/body.rs): the separate `lead_bodies` table repeated the
-- lead id twice (its key and that key's index) and the body repeated the columns. The
-- stored ingest answer `leads.result` goes: every fact in it is in the lead's columns and
-- its requests (ids, quality, duplicate status and match, auto-delivery's decisions), and
-- an idempotent replay rebuilds it from them. Bodies moved here keep their text; `leadrelay
-- vacuum` compresses them and gives the freed pages back to the file system.
ALTER TABLE leads ADD COLUMN body BLOB;
UPDATE leads SET body = (SELECT b.body FROM lead_bodies b WHERE b.lead_id = leads.id);
DROP TABLE lead_bodies;
ALTER TABLE leads DROP COLUMN result;

-- The duplicate keys are stored as 48-bit hashes (src/ingest/normalize.rs, `key_hash`;
-- the migration's SQL function `leadrelay_key_hash` is the same function): the normalised
-- email repeated the email in the row and again in its index. Readers confirm a hash match
-- against the stored email or phone.
ALTER TABLE leads ADD COLUMN email_key INTEGER;
ALTER TABLE leads ADD COLUMN phone_key INTEGER;
UPDATE leads SET email_key = leadrelay_key_hash(email_norm), phone_key = leadrelay_key_hash(phone_norm)
WHERE email_norm IS NOT NULL OR phone_norm IS NOT NULL;
DROP INDEX leads_email;
DROP INDEX leads_phone;
ALTER TABLE leads DROP COLUMN email_norm;
ALTER TABLE leads DROP COLUMN phone_norm;
CREATE INDEX leads_email ON leads(email_key, created_at) WHERE email_key IS NOT NULL;
CREATE INDEX leads_phone ON leads(phone_key, created_at) WHERE phone_key IS NOT NULL;

-- Erasure: an erased (or purged) lead is a tombstone. Its person, address, contact keys,
-- capture metadata, additional properties, raw body and interest answers are gone; ids,
-- times, products, statuses and money stay. NULL means not erased.
ALTER TABLE leads ADD COLUMN erased_at INTEGER;

-- An event whose lead was erased carries the tombstone; attempts recorded after that keep
-- no response excerpt (a buyer's answer may echo the person).
ALTER TABLE outbox_events ADD COLUMN erased_at INTEGER;

-- Retention: leads of the workspace older than this many milliseconds are purged (leave a
-- tombstone) by `serve`; NULL keeps them.
ALTER TABLE workspaces ADD COLUMN retention_ms INTEGER CHECK (retention_ms > 0);

-- The erasure log: one row per `lead erase` and per purge run. What was asked (by lead id,
-- email or phone; by age), when, by whom and how many records changed; never the erased
-- values. A purge run's `cutoff` is the creation time it purged up to: a finished run means
-- every lead of its workspace created before it is a tombstone, so the next run starts
-- there.
CREATE TABLE erasures (
    id           TEXT PRIMARY KEY,
    kind         TEXT NOT NULL CHECK (kind IN ('erase', 'purge')),
    -- erase: 'lead', 'email' or 'phone'; purge: 'retention' (serve) or 'older_than' (CLI).
    selector     TEXT NOT NULL,
    -- purge: the workspace purged; erase: NULL (an erasure covers every workspace).
    workspace_id TEXT REFERENCES workspaces(id),
    cutoff       INTEGER,
    -- Leads made tombstones, and the other records the person was removed from.
    leads        INTEGER NOT NULL DEFAULT 0,
    requests     INTEGER NOT NULL DEFAULT 0,
    transactions INTEGER NOT NULL DEFAULT 0,
    events       INTEGER NOT NULL DEFAULT 0,
    attempts     INTEGER NOT NULL DEFAULT 0,
    -- `operator:<user>` (CLI) or `retention` (serve).
    actor        TEXT NOT NULL,
    reason       TEXT,
    started_at   INTEGER NOT NULL,
    finished_at  INTEGER
);
CREATE INDEX erasures_started ON erasures(started_at);
CREATE INDEX erasures_purge ON erasures(workspace_id, cutoff) WHERE kind = 'purge' AND finished_at IS NOT NULL;
