-- Claims find work endpoint by endpoint (see `src/queue/claim.rs`): an endpoint that has no room
-- in the claiming process is skipped with one index seek instead of a walk over its backlog. The
-- unleased pending rows are therefore indexed by endpoint first, then due time; the index stays
-- the one entry a new delivery adds.
DROP INDEX deliveries_claimable;
CREATE INDEX deliveries_claimable ON deliveries (endpoint_id, next_attempt_at)
    WHERE status = 'pending' AND lease_until IS NULL;

-- The next attempt was asked for by an operator (resend, replay, recover), so it is recorded as
-- a manual attempt; recording an attempt clears it.
ALTER TABLE deliveries ADD COLUMN manual INTEGER NOT NULL DEFAULT 0;
