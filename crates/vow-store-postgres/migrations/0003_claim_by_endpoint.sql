-- Claims find work endpoint by endpoint (see `src/queue/claim.rs`): an endpoint that has no room
-- in the claiming process is skipped with one index seek instead of a walk over its backlog. The
-- pending rows are therefore indexed by endpoint first, then due time. Lease columns stay out of
-- the index, so a claim remains a HOT update.
CREATE INDEX deliveries_pending_endpoint_id_next_attempt_at_idx
    ON deliveries (endpoint_id, next_attempt_at) WHERE status = 'pending';
DROP INDEX deliveries_pending_next_attempt_at_idx;

-- The next attempt was asked for by an operator (resend, replay, recover), so it is recorded as
-- a manual attempt; recording an attempt clears it.
ALTER TABLE deliveries ADD COLUMN manual BOOLEAN NOT NULL DEFAULT false;
