-- leadrelay schema, migration 17: retention takes the pings that never became a lead
-- (issue 15, DESIGN.md sections 12 and 14).
--
-- A purge deletes a workspace's pings created before its cutoff that ended without a post
-- (rejected, expired, released), with their reservations and bids; a posted ping stays
-- with its lead's tombstone. Partial: the walk never passes a posted ping (years of them
-- under a long retention), and a ping leaves the index when it is posted.
CREATE INDEX pings_unposted ON pings(workspace_id, created_at)
    WHERE status <> 'accepted' AND status <> 'posted';
