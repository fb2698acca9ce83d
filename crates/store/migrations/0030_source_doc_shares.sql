-- leadrelay schema, migration 30: shared links to a source's posting instructions
-- (DESIGN.md section 21). A link's token is stored as its SHA-256 only, and looked up by it;
-- one link per source (a new one replaces the old). Deleting the source deletes its link.
-- IF NOT EXISTS: running the migration again must not fail.
CREATE TABLE IF NOT EXISTS source_doc_shares (
    source_id  TEXT PRIMARY KEY REFERENCES sources(id) ON DELETE CASCADE,
    token_hash TEXT NOT NULL UNIQUE,
    created_at INTEGER NOT NULL
) WITHOUT ROWID;
