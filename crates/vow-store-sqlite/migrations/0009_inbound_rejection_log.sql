-- Issue 13: the rejection log is bounded per source. Anyone who knows a source id can send it
-- bad signatures, so the rows are a ring of N slots per source (`slot`, overwritten in place,
-- N = inbound_rejections_kept) and the exact totals live in one counter row per source and
-- reason, updated in place: a flood costs a fixed number of rows and three writes a request.
ALTER TABLE inbound_rejections ADD COLUMN slot INTEGER;

-- Exact counts by reason, with when each reason was first and last seen.
CREATE TABLE inbound_rejection_counts (
    source_id TEXT    NOT NULL REFERENCES sources (id) ON DELETE CASCADE,
    reason    TEXT    NOT NULL,
    count     INTEGER NOT NULL CHECK (count > 0),
    first_at  INTEGER NOT NULL,
    last_at   INTEGER NOT NULL,
    PRIMARY KEY (source_id, reason)
);

-- How many rejections each source's ring has taken: the next one goes to slot recorded % N.
CREATE TABLE inbound_rejection_ring (
    source_id TEXT    NOT NULL PRIMARY KEY REFERENCES sources (id) ON DELETE CASCADE,
    recorded  INTEGER NOT NULL CHECK (recorded > 0)
);

-- The rows recorded so far are counted, then the newest 1000 per source (the default N) keep
-- their place in the ring, the oldest in slot 0, and the rest are deleted.
INSERT INTO inbound_rejection_counts (source_id, reason, count, first_at, last_at)
SELECT source_id, reason, count(*), min(received_at), max(received_at)
FROM inbound_rejections GROUP BY source_id, reason;

WITH ranked AS (
    SELECT id,
           count(*) OVER (PARTITION BY source_id) AS total,
           row_number() OVER (PARTITION BY source_id ORDER BY id DESC) AS newest
    FROM inbound_rejections
)
UPDATE inbound_rejections SET slot = min(ranked.total, 1000) - ranked.newest
FROM ranked WHERE ranked.id = inbound_rejections.id;

DELETE FROM inbound_rejections WHERE slot < 0;

INSERT INTO inbound_rejection_ring (source_id, recorded)
SELECT source_id, count(*) FROM inbound_rejections GROUP BY source_id;

CREATE UNIQUE INDEX inbound_rejections_slot ON inbound_rejections (source_id, slot);
