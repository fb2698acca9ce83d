-- Storage per lead: lead and lead-request ids stored as their ULID's 16 bytes (a BLOB)
-- instead of 31 characters, in every column that names one (`ids::Stored`). An id that is
-- not one of ours in its canonical text (`lead_` or `lreq_` and an upper-case ULID) stays
-- text, as `ids::compact` leaves it, so every id reads back exactly as it was.
--
-- The rewrite itself is this migration's Rust step (`db::migrate::compact_stored_ids`): a
-- chunk of rows per statement, so that no statement's journal holds a whole table. Parents'
-- keys change before their children's; the foreign keys are checked at commit, when every
-- column holds the new form.
PRAGMA defer_foreign_keys = ON;
