-- Issue 13: the rejection log is bounded per source. Anyone who knows a source id can send it
-- bad signatures, so the rows are a ring of N slots per source (`slot`, overwritten in place,
-- N = inbound_rejections_kept) and the exact totals live in one counter row per source and
-- reason, updated in place: a flood costs a fixed number of rows and one statement a request.
ALTER TABLE inbound_rejections ADD COLUMN slot INTEGER;

-- Exact counts by reason, with when each reason was first and last seen.
CREATE TABLE inbound_rejection_counts (
    source_id TEXT COLLATE "C" NOT NULL,
    reason    TEXT NOT NULL,
    count     BIGINT NOT NULL CHECK (count > 0),
    first_at  TIMESTAMPTZ NOT NULL,
    last_at   TIMESTAMPTZ NOT NULL,
    CONSTRAINT inbound_rejection_counts_pkey PRIMARY KEY (source_id, reason),
    CONSTRAINT inbound_rejection_counts_source_fkey FOREIGN KEY (source_id)
        REFERENCES sources (id) ON DELETE CASCADE
);

-- How many rejections each source's ring has taken: the next one goes to slot recorded % N.
-- Its row lock serialises one source's rejections (other sources are not held up).
CREATE TABLE inbound_rejection_ring (
    source_id TEXT COLLATE "C" NOT NULL,
    recorded  BIGINT NOT NULL CHECK (recorded > 0),
    CONSTRAINT inbound_rejection_ring_pkey PRIMARY KEY (source_id),
    CONSTRAINT inbound_rejection_ring_source_fkey FOREIGN KEY (source_id)
        REFERENCES sources (id) ON DELETE CASCADE
);

-- The rows recorded so far are counted, then the newest 1000 per source (the default N) keep
-- their place in the ring, the oldest in slot 0, and the rest are deleted.
INSERT INTO inbound_rejection_counts (source_id, reason, count, first_at, last_at)
SELECT source_id, reason, count(*), min(received_at), max(received_at)
FROM inbound_rejections GROUP BY source_id, reason;

UPDATE inbound_rejections r SET slot = ranked.slot
FROM (SELECT id,
             LEAST(count(*) OVER (PARTITION BY source_id), 1000)
               - row_number() OVER (PARTITION BY source_id ORDER BY id DESC) AS slot
      FROM inbound_rejections) ranked
WHERE ranked.id = r.id;

DELETE FROM inbound_rejections WHERE slot < 0;

INSERT INTO inbound_rejection_ring (source_id, recorded)
SELECT source_id, count(*) FROM inbound_rejections GROUP BY source_id;

ALTER TABLE inbound_rejections ALTER COLUMN slot SET NOT NULL;
CREATE UNIQUE INDEX inbound_rejections_slot ON inbound_rejections (source_id, slot);
