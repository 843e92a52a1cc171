-- vow's PostgreSQL schema: which operator replay last requeued a delivery
-- (vow_store::queue::StatsFilter::replay), so a replay's progress counts exactly its own
-- deliveries. NULL until a replay; a resend clears it. Forward-only (see 0001_init.sql).
--
-- Only a replay or a resend writes the column, so the workers' updates of a delivery stay HOT.

ALTER TABLE deliveries ADD COLUMN replay_id TEXT;

CREATE INDEX deliveries_by_replay_idx ON deliveries (replay_id) WHERE replay_id IS NOT NULL;
