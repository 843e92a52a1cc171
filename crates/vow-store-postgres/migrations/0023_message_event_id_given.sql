-- vow's PostgreSQL schema: only messages that carry an `eventId` are indexed by it. Forward-only
-- (see 0001_init.sql for the conventions).
--
-- The unique (app_id, event_id) constraint indexed every message, and most carry no eventId:
-- NULLs never conflict, yet each took an index entry, one of the 17 a message with one endpoint
-- writes (its row's, its delivery's and its attempt's, the delivery's update included; issue 18).
-- A partial unique index keeps the rule for every message that has an eventId, and the same
-- name, which vow reads a duplicate eventId by. Lookups by eventId (`event_id = $2`) imply
-- `event_id IS NOT NULL`, so they keep using it. Building it holds off writes to messages while
-- it reads the table, once, as vow starts.
CREATE UNIQUE INDEX messages_app_id_event_id_given
    ON messages (app_id, event_id) WHERE event_id IS NOT NULL;
ALTER TABLE messages DROP CONSTRAINT messages_app_id_event_id_key;
ALTER INDEX messages_app_id_event_id_given RENAME TO messages_app_id_event_id_key;
