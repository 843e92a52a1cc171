-- Which operator replay last requeued a delivery (vow_store::queue::StatsFilter::replay), so a
-- replay's progress counts exactly its own deliveries. NULL until a replay; a resend clears it.
ALTER TABLE deliveries ADD COLUMN replay_id TEXT;

-- A replay's deliveries, counted without a walk over the endpoint's others.
CREATE INDEX deliveries_by_replay ON deliveries (replay_id) WHERE replay_id IS NOT NULL;
