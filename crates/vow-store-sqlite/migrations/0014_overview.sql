-- The console's Overview (vow_store::overview): delivery activity per minute, the disabled
-- endpoints by index, and the claimable deliveries counted from their index alone.

-- What the recorded outcomes came to, per minute of record time: recording a batch adds its
-- tally here in the same transaction (one row write per batch and minute, not per attempt), so
-- a day is 1,440 rows to read whatever the traffic. Retention deletes minutes older than two
-- days. Outcomes recorded before this migration are not counted.
CREATE TABLE delivery_activity (
    -- The minute's start, microseconds since the Unix epoch.
    minute        INTEGER NOT NULL PRIMARY KEY,
    -- Attempts that succeeded / failed.
    succeeded     INTEGER NOT NULL,
    failed        INTEGER NOT NULL,
    -- Deliveries that ended delivered / dead-lettered.
    delivered     INTEGER NOT NULL,
    dead_lettered INTEGER NOT NULL,
    -- Endpoints a dead-letter disabled.
    disabled      INTEGER NOT NULL
) WITHOUT ROWID;

-- The disabled endpoints: counted without a walk over every endpoint. Only a change of
-- `disabled` writes it (rare: an operator, or an auto-disable).
CREATE INDEX endpoints_disabled ON endpoints (id) WHERE disabled = 1;

-- 0003's claim index again, with the two columns its condition fixes (status = 'pending',
-- lease_until NULL) appended. SQLite checks a partial index's condition against the table row
-- unless the index holds those columns, so counting the backlog read the table once per row
-- (0.4 s for 100,000 due deliveries). With them the count, and a claim's walk of the endpoints
-- and of each one's due rows, read the index only. Still the one index entry a new delivery
-- adds; about 9 bytes wider.
DROP INDEX deliveries_claimable;
CREATE INDEX deliveries_claimable ON deliveries (endpoint_id, next_attempt_at, status, lease_until)
    WHERE status = 'pending' AND lease_until IS NULL;
