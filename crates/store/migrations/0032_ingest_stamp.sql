-- leadrelay schema, migration 32: the stamp of migration 31 also moves with every change of
-- what ingest reads of a source's workspace: its suppression action (no other column of a
-- workspace) and key, and its check steps with their secrets (`ingest::kept`).
-- IF NOT EXISTS: running the migration again must not fail.
CREATE TRIGGER IF NOT EXISTS source_stamp_workspace_update AFTER UPDATE OF suppression_action ON workspaces
BEGIN UPDATE source_stamp SET generation = generation + 1 WHERE id = 1; END;
CREATE TRIGGER IF NOT EXISTS source_stamp_suppression_key_insert AFTER INSERT ON suppression_keys
BEGIN UPDATE source_stamp SET generation = generation + 1 WHERE id = 1; END;
CREATE TRIGGER IF NOT EXISTS source_stamp_suppression_key_update AFTER UPDATE ON suppression_keys
BEGIN UPDATE source_stamp SET generation = generation + 1 WHERE id = 1; END;
CREATE TRIGGER IF NOT EXISTS source_stamp_suppression_key_delete AFTER DELETE ON suppression_keys
BEGIN UPDATE source_stamp SET generation = generation + 1 WHERE id = 1; END;
CREATE TRIGGER IF NOT EXISTS source_stamp_check_step_insert AFTER INSERT ON check_steps
BEGIN UPDATE source_stamp SET generation = generation + 1 WHERE id = 1; END;
CREATE TRIGGER IF NOT EXISTS source_stamp_check_step_update AFTER UPDATE ON check_steps
BEGIN UPDATE source_stamp SET generation = generation + 1 WHERE id = 1; END;
CREATE TRIGGER IF NOT EXISTS source_stamp_check_step_delete AFTER DELETE ON check_steps
BEGIN UPDATE source_stamp SET generation = generation + 1 WHERE id = 1; END;
CREATE TRIGGER IF NOT EXISTS source_stamp_check_secret_insert AFTER INSERT ON check_step_secrets
BEGIN UPDATE source_stamp SET generation = generation + 1 WHERE id = 1; END;
CREATE TRIGGER IF NOT EXISTS source_stamp_check_secret_update AFTER UPDATE ON check_step_secrets
BEGIN UPDATE source_stamp SET generation = generation + 1 WHERE id = 1; END;
CREATE TRIGGER IF NOT EXISTS source_stamp_check_secret_delete AFTER DELETE ON check_step_secrets
BEGIN UPDATE source_stamp SET generation = generation + 1 WHERE id = 1; END;
