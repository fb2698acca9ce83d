-- leadrelay schema, migration 14: finding the pings tied to a person `lead erase` takes
-- (DESIGN.md sections 12 and 14): a posted ping by its lead (an erasure or a purge of the
-- lead), any ping by the email or phone hash it promised (an erasure by email or phone).
-- Partial: a ping without a lead or a hash costs no entry.
CREATE INDEX pings_lead ON pings(lead_id) WHERE lead_id IS NOT NULL;
CREATE INDEX pings_email ON pings(email_sha256) WHERE email_sha256 IS NOT NULL;
CREATE INDEX pings_phone ON pings(phone_sha256) WHERE phone_sha256 IS NOT NULL;
