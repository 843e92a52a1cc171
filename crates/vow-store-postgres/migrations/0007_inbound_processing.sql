-- Processing inbound events (issue 5, items 6-8; vow_store::inbound::processing): leases on
-- inbound_events, each destination's outcome, and the version mark of each entity.
--
-- * A claim takes due rows (`received` or `retryable`, next_attempt_at <= now) with
--   FOR UPDATE SKIP LOCKED and makes them `processing` under a lease (token + end); recording
--   an outcome, or the settling of a lease that ran out, clears the lease.
-- * inbound_forwards keeps what became of an event at each destination; the event's state is
--   their aggregate (computed by vow_store::inbound::processing::aggregate, not here).
-- * inbound_entities holds, per (source, entity), the newest version claimed: the row is locked
--   while a claim decides whether an event of that entity is newer, so two processes claiming
--   at once decide one after the other.

ALTER TABLE inbound_events
    -- Claims so far (by a worker or a pull consumer).
    ADD COLUMN attempts        INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    -- When a `received` or `retryable` event is due; NULL in every other state.
    ADD COLUMN next_attempt_at TIMESTAMPTZ,
    -- The holder of a `processing` event: both set by a claim, both cleared when it ends.
    ADD COLUMN lease_token     TEXT,
    ADD COLUMN lease_until     TIMESTAMPTZ,
    -- Who holds it: 'push' (vow's workers) or 'pull' (a pull consumer).
    ADD COLUMN claimed_by      TEXT CHECK (claimed_by IN ('push', 'pull')),
    -- The last problem (a failed forward, why it was superseded), for operators.
    ADD COLUMN last_error      TEXT;

-- Events received before this migration are due at their arrival.
UPDATE inbound_events SET next_attempt_at = received_at WHERE state = 'received';

-- The claim: due events, oldest first. Only the backlog is indexed.
CREATE INDEX inbound_events_due ON inbound_events (next_attempt_at, id)
    WHERE state IN ('received', 'retryable');
-- The settling of leases that ran out.
CREATE INDEX inbound_events_leased ON inbound_events (lease_until)
    WHERE state = 'processing';
-- Whether an entity has an event being processed.
CREATE INDEX inbound_events_busy_entity ON inbound_events (source_id, entity)
    WHERE state = 'processing';

-- One row per destination an event was forwarded to ('pull' for a pull consumer).
CREATE TABLE inbound_forwards (
    event_id    TEXT COLLATE "C" NOT NULL,
    -- The destination's id, or 'pull'.
    destination TEXT COLLATE "C" NOT NULL,
    outcome     TEXT NOT NULL
        CHECK (outcome IN ('completed', 'rejected', 'retryable', 'uncertain', 'dead_lettered')),
    -- Attempts made at that destination.
    attempts    INTEGER NOT NULL CHECK (attempts >= 0),
    -- The last response status; NULL when none came.
    status      INTEGER CHECK (status BETWEEN 0 AND 65535),
    error       TEXT,
    updated_at  TIMESTAMPTZ NOT NULL,
    CONSTRAINT inbound_forwards_pkey PRIMARY KEY (event_id, destination),
    CONSTRAINT inbound_forwards_event_fkey FOREIGN KEY (event_id)
        REFERENCES inbound_events (id) ON DELETE CASCADE
);

-- The newest version claimed per entity of a source. Kept after the entity's deletion: it is
-- the versioned tombstone that supersedes late older updates.
CREATE TABLE inbound_entities (
    source_id  TEXT COLLATE "C" NOT NULL,
    entity     TEXT NOT NULL,
    version    TEXT NOT NULL,
    -- The inbound event that set it.
    event_id   TEXT COLLATE "C" NOT NULL,
    updated_at TIMESTAMPTZ NOT NULL,
    CONSTRAINT inbound_entities_pkey PRIMARY KEY (source_id, entity),
    CONSTRAINT inbound_entities_source_fkey FOREIGN KEY (source_id)
        REFERENCES sources (id) ON DELETE CASCADE
);
