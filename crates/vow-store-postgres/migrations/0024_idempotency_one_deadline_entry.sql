-- vow's PostgreSQL schema: an Idempotency-Key record holds one deadline index entry at a time.
-- Forward-only (see 0001_init.sql for the conventions).
--
-- The cleaner finds records by `expires_at` until they become tombstones and by
-- `tombstone_until` after (vow_idempotency::postgres::purge), yet both indexes held every
-- record: a keyed create wrote an entry in each, and turning it into a tombstone (which changes
-- `state`, so it is not a HOT update) wrote both again. Each index now holds only the records
-- it is read for: one entry fewer per keyed create, and one fewer when it becomes a tombstone
-- (issue 18). The statements after the drops are vow_idempotency::postgres::SCHEMA's; a test
-- checks the migrations hold all of it. Building them holds off writes to the records while they
-- read the table, once, as vow starts.
DROP INDEX idempotency_records_expires_at;
CREATE INDEX IF NOT EXISTS idempotency_records_expires_at
    ON idempotency_records (expires_at) WHERE state <> 'tombstone';
DROP INDEX idempotency_records_tombstone_until;
CREATE INDEX IF NOT EXISTS idempotency_records_tombstone_until
    ON idempotency_records (tombstone_until) WHERE state = 'tombstone';
