-- vow's PostgreSQL schema: which bulk replay of a source last requeued an inbound forward
-- (vow_store::inbound::source_replay), so the replay's progress counts exactly its own
-- forwards. NULL until a bulk replay; a single-event replay of the forward clears it.
-- Forward-only (see 0001_init.sql).

ALTER TABLE inbound_forwards ADD COLUMN replay_id TEXT;

-- A replay's forwards, counted (and their events made due) without a walk over the others.
CREATE INDEX inbound_forwards_by_replay ON inbound_forwards (replay_id)
    WHERE replay_id IS NOT NULL;
