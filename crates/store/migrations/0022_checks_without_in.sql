-- leadrelay schema, migration 22: the CHECKs of the outbox's tables and of `transactions`
-- compare with OR, not IN, as those of `leads` always have (see `leads.quality_status` in
-- migration 1). SQLite evaluates an IN list of three or more constants through a temporary
-- b-tree that it builds and drops each time the CHECK runs: on every insert of a
-- transaction (two of them), of an outbox event and of an attempt, and on every change of a
-- transaction's or an event's status, all on the writer.
--
-- Only the text of the constraints changes, to an equivalent expression, so no row is read
-- or written: the tables' SQL is rewritten in `sqlite_schema` (SQLite's documented procedure
-- for changing CHECK constraints without rebuilding a table); the step in Rust
-- (`db::migrate::checks_rewritten`) then moves the schema version on, so every other
-- connection reads the new text too, and checks that the tables still parse. `replace` leaves a text it
-- does not find as it is: running this again is harmless.
PRAGMA writable_schema = ON;

UPDATE sqlite_schema SET sql = replace(sql,
    'CHECK (status IN (''pending'', ''delivered'', ''failed''))',
    'CHECK (status = ''pending'' OR status = ''delivered'' OR status = ''failed'')')
WHERE type = 'table' AND name = 'outbox_events';

UPDATE sqlite_schema SET sql = replace(sql,
    'CHECK (outcome IN (''delivered'', ''retry'', ''failed'', ''refused''))',
    'CHECK (outcome = ''delivered'' OR outcome = ''retry'' OR outcome = ''failed''
                            OR outcome = ''refused'')')
WHERE type = 'table' AND name = 'outbox_attempts';

UPDATE sqlite_schema SET sql = replace(replace(sql,
    'CHECK (status IN (''delivered'', ''acknowledged'', ''rejected'', ''payout_pending'', ''paid'', ''cancelled''))',
    'CHECK (status = ''delivered'' OR status = ''acknowledged'' OR status = ''rejected''
                               OR status = ''payout_pending'' OR status = ''paid''
                               OR status = ''cancelled'')'),
    'CHECK (delivery_status IN (''pending'', ''sent'', ''failed''))',
    'CHECK (delivery_status = ''pending'' OR delivery_status = ''sent''
                                OR delivery_status = ''failed'')')
WHERE type = 'table' AND name = 'transactions';

-- RESET: off again, and this connection parses the schema again (the writer's, which
-- migrates the file and would otherwise keep the old CHECKs until it closes).
PRAGMA writable_schema = RESET;
