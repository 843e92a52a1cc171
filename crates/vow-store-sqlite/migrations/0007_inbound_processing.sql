-- Processing inbound events (issue 5, items 6-8; vow_store::inbound::processing): leases on
-- inbound_events, each destination's outcome, and the version mark of each entity.

-- attempts: claims so far. next_attempt_at: when a received or retryable event is due.
-- lease_*: the holder of a processing event. claimed_by: 'push' (vow's workers) or 'pull'.
ALTER TABLE inbound_events ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0;
ALTER TABLE inbound_events ADD COLUMN next_attempt_at INTEGER;
ALTER TABLE inbound_events ADD COLUMN lease_token TEXT;
ALTER TABLE inbound_events ADD COLUMN lease_until INTEGER;
ALTER TABLE inbound_events ADD COLUMN claimed_by TEXT;
ALTER TABLE inbound_events ADD COLUMN last_error TEXT;

UPDATE inbound_events SET next_attempt_at = received_at WHERE state = 'received';

-- The claim: due events, oldest first; the settling of expired leases; busy entities.
CREATE INDEX inbound_events_due ON inbound_events (next_attempt_at, id)
    WHERE state IN ('received', 'retryable');
CREATE INDEX inbound_events_leased ON inbound_events (lease_until)
    WHERE state = 'processing';
CREATE INDEX inbound_events_busy_entity ON inbound_events (source_id, entity)
    WHERE state = 'processing';

-- One row per destination an event was forwarded to ('pull' for a pull consumer).
CREATE TABLE inbound_forwards (
    event_id    TEXT    NOT NULL REFERENCES inbound_events (id) ON DELETE CASCADE,
    destination TEXT    NOT NULL,
    -- completed, rejected, retryable, uncertain, dead_lettered
    outcome     TEXT    NOT NULL,
    attempts    INTEGER NOT NULL,
    status      INTEGER,
    error       TEXT,
    updated_at  INTEGER NOT NULL,
    PRIMARY KEY (event_id, destination)
);

-- The newest version claimed per entity of a source. Kept after the entity's deletion: it is
-- the versioned tombstone that supersedes late older updates.
CREATE TABLE inbound_entities (
    source_id  TEXT    NOT NULL REFERENCES sources (id) ON DELETE CASCADE,
    entity     TEXT    NOT NULL,
    version    TEXT    NOT NULL,
    -- The inbound event that set it.
    event_id   TEXT    NOT NULL,
    updated_at INTEGER NOT NULL,
    PRIMARY KEY (source_id, entity)
);
