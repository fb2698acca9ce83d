-- Storage per lead: lead and lead-request ids stored as their ULID's 16 bytes (a BLOB)
-- instead of 31 characters, in every column that names one (`ids::Stored`). An id that is
-- not one of ours in its canonical text (`lead_` or `lreq_` and an upper-case ULID) stays
-- text, as `ids::compact` leaves it, so every id reads back exactly as it was.
--
-- The parents' keys change before their children's: the foreign keys are checked at
-- commit, when every column holds the new form.
PRAGMA defer_foreign_keys = ON;

UPDATE leads SET id = leadrelay_compact_id('lead', id) WHERE typeof(id) = 'text';
UPDATE lead_requests
   SET id = leadrelay_compact_id('lreq', id), lead_id = leadrelay_compact_id('lead', lead_id)
 WHERE typeof(id) = 'text' OR typeof(lead_id) = 'text';
UPDATE transactions
   SET lead_id = leadrelay_compact_id('lead', lead_id),
       lead_request_id = leadrelay_compact_id('lreq', lead_request_id)
 WHERE typeof(lead_id) = 'text' OR typeof(lead_request_id) = 'text';
UPDATE evaluation_features SET lead_request_id = leadrelay_compact_id('lreq', lead_request_id)
 WHERE typeof(lead_request_id) = 'text';
UPDATE supplier_cancellations SET lead_id = leadrelay_compact_id('lead', lead_id)
 WHERE typeof(lead_id) = 'text';
UPDATE pings SET lead_id = leadrelay_compact_id('lead', lead_id) WHERE typeof(lead_id) = 'text';
UPDATE bids SET lead_request_id = leadrelay_compact_id('lreq', lead_request_id)
 WHERE typeof(lead_request_id) = 'text';
