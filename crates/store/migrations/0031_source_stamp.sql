-- leadrelay schema, migration 31: a number that changes with every change of what ingest
-- reads of a source (its row and its container's), so that ingest may keep sources between
-- requests and still see a change made by any process (the CLI, another server's writer, an
-- operator's sqlite3) from the next request on (`ingest::kept`).
-- IF NOT EXISTS and OR IGNORE: running the migration again must not fail.
CREATE TABLE IF NOT EXISTS source_stamp (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    generation INTEGER NOT NULL
);
INSERT OR IGNORE INTO source_stamp (id, generation) VALUES (1, 0);

CREATE TRIGGER IF NOT EXISTS source_stamp_source_insert AFTER INSERT ON sources
BEGIN UPDATE source_stamp SET generation = generation + 1 WHERE id = 1; END;
CREATE TRIGGER IF NOT EXISTS source_stamp_source_update AFTER UPDATE ON sources
BEGIN UPDATE source_stamp SET generation = generation + 1 WHERE id = 1; END;
CREATE TRIGGER IF NOT EXISTS source_stamp_source_delete AFTER DELETE ON sources
BEGIN UPDATE source_stamp SET generation = generation + 1 WHERE id = 1; END;
CREATE TRIGGER IF NOT EXISTS source_stamp_container_update AFTER UPDATE ON containers
BEGIN UPDATE source_stamp SET generation = generation + 1 WHERE id = 1; END;
CREATE TRIGGER IF NOT EXISTS source_stamp_container_delete AFTER DELETE ON containers
BEGIN UPDATE source_stamp SET generation = generation + 1 WHERE id = 1; END;
