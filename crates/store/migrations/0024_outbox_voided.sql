-- leadrelay schema, migration 24: an outbox event may be `voided`: never sent, because its
-- transaction was rejected or cancelled before the event's first attempt (the person's data
-- is not sent for a sale that no longer exists).
--
-- Only the text of the status CHECK of `outbox_events` changes (as in migration 22, whose
-- text it extends): no row is read or written. The step in Rust
-- (`db::migrate::checks_rewritten`) moves the schema version on and checks that the table
-- still parses. `replace` leaves a text it does not find as it is: running this again is
-- harmless.
PRAGMA writable_schema = ON;

UPDATE sqlite_schema SET sql = replace(sql,
    'CHECK (status = ''pending'' OR status = ''delivered'' OR status = ''failed'')',
    'CHECK (status = ''pending'' OR status = ''delivered'' OR status = ''failed''
                            OR status = ''voided'')')
WHERE type = 'table' AND name = 'outbox_events';

PRAGMA writable_schema = RESET;
