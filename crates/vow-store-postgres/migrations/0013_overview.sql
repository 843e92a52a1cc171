-- vow's PostgreSQL schema: the console's Overview (vow_store::overview). Forward-only (see
-- 0001_init.sql for the conventions).
--
-- * What the recorded outcomes came to, per minute of record time: recording a batch adds its
--   tally in the same transaction, as its last statement (one row write per batch and minute,
--   not per attempt), so a day is a few thousand rows to read whatever the traffic. Every
--   process records into the same minute, so each minute is split in `shard`s (picked at
--   random per write) and a record waits for another only when both picked the same shard;
--   reads sum them. Retention deletes minutes older than two days. Outcomes recorded before
--   this migration are not counted.
-- * The disabled endpoints, counted by index.

CREATE TABLE delivery_activity (
    minute        TIMESTAMPTZ NOT NULL,
    shard         SMALLINT NOT NULL CHECK (shard >= 0),
    -- Attempts that succeeded / failed.
    succeeded     BIGINT NOT NULL CHECK (succeeded >= 0),
    failed        BIGINT NOT NULL CHECK (failed >= 0),
    -- Deliveries that ended delivered / dead-lettered.
    delivered     BIGINT NOT NULL CHECK (delivered >= 0),
    dead_lettered BIGINT NOT NULL CHECK (dead_lettered >= 0),
    -- Endpoints a dead-letter disabled.
    disabled      BIGINT NOT NULL CHECK (disabled >= 0),
    CONSTRAINT delivery_activity_pkey PRIMARY KEY (minute, shard)
);

-- Only a change of `disabled` writes it (rare: an operator, or an auto-disable); the dead-letter
-- count's updates stay HOT.
CREATE INDEX endpoints_disabled_idx ON endpoints (id) WHERE disabled;
