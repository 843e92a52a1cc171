-- The delivery queue: per-endpoint delivery options, leases and outcomes on deliveries, the
-- attempts log, and the indexes the workers and the retention job need.
--
-- Claim rule (see `vow_store::queue`): a delivery is claimable when it is `pending`, due
-- (`next_attempt_at <= now`) and not leased (`lease_until IS NULL`) or its lease expired
-- (`lease_until <= now`). The two partial indexes below split that OR in two exact ranges, so a
-- claim never walks over rows another worker holds: unleased pending rows by due time, and
-- leased pending rows by lease end. A lease is only ever set on a `pending` row and is cleared by
-- every transition out of it.

ALTER TABLE endpoints ADD COLUMN signature_style TEXT NOT NULL DEFAULT 'standard-webhooks';
-- Per-attempt timeout; NULL = the server's default.
ALTER TABLE endpoints ADD COLUMN timeout_ms INTEGER;
-- `RetrySchedule`'s Display form (`30s,2m,8m`, `none`); NULL = the server's default.
ALTER TABLE endpoints ADD COLUMN retry_schedule TEXT;
-- Dead-letters since the last delivered one, counted while the endpoint is enabled; restarts
-- at 0 when it disables the endpoint (a re-enabled endpoint gets a fresh budget).
ALTER TABLE endpoints ADD COLUMN consecutive_dead_letters INTEGER NOT NULL DEFAULT 0;

ALTER TABLE deliveries ADD COLUMN lease_token TEXT;
ALTER TABLE deliveries ADD COLUMN lease_until INTEGER;
ALTER TABLE deliveries ADD COLUMN client_errors INTEGER NOT NULL DEFAULT 0;
ALTER TABLE deliveries ADD COLUMN last_status INTEGER;
ALTER TABLE deliveries ADD COLUMN dead_letter_reason TEXT;
-- Last change by the queue (record, resend, replay, disable); NULL until the first one.
ALTER TABLE deliveries ADD COLUMN updated_at INTEGER;

-- An endpoint's deliveries by status and creation time: disabling (its pending rows to held),
-- replay (its dead-lettered and held rows in a time range) and stats read one range of this
-- index instead of the endpoint's whole history. Still serves the cascade from endpoints.
DROP INDEX deliveries_by_endpoint;
CREATE INDEX deliveries_by_endpoint ON deliveries (app_id, endpoint_id, status, created_at);

-- 0001's (status, next_attempt_at) index served no query; the two partial indexes below replace
-- it, so a new delivery still costs the same number of index writes (only the first holds it).
DROP INDEX deliveries_due;
-- Unleased pending rows by due time; endpoint_id rides along so `skip_endpoints` is checked in
-- the index (the key `id` is in every index of a WITHOUT ROWID table).
CREATE INDEX deliveries_claimable ON deliveries (next_attempt_at, endpoint_id)
    WHERE status = 'pending' AND lease_until IS NULL;
-- Leased rows by lease end: expired leases to take over, and `next_due` (which also reads
-- next_attempt_at, here in the index).
CREATE INDEX deliveries_leased ON deliveries (lease_until, next_attempt_at)
    WHERE status = 'pending' AND lease_until IS NOT NULL;

-- One row per delivery attempt (Svix's message attempt). A rowid table: rows carry up to 4 KiB
-- of response body. Deleting the message or the endpoint (and so the application) deletes them.
CREATE TABLE attempts (
    id              TEXT    NOT NULL PRIMARY KEY,
    app_id          TEXT    NOT NULL,
    msg_id          TEXT    NOT NULL,
    endpoint_id     TEXT    NOT NULL,
    delivery_id     TEXT    NOT NULL,
    started_at      INTEGER NOT NULL,
    url             TEXT    NOT NULL,
    response_status INTEGER,
    -- '' once expunged or purged.
    response        TEXT    NOT NULL,
    duration_ms     INTEGER NOT NULL,
    success         INTEGER NOT NULL,
    error           TEXT,
    -- 'scheduled' or 'manual'.
    trigger         TEXT    NOT NULL,
    FOREIGN KEY (app_id, msg_id) REFERENCES messages (app_id, id) ON DELETE CASCADE,
    FOREIGN KEY (app_id, endpoint_id) REFERENCES endpoints (app_id, id) ON DELETE CASCADE
);

-- Listings by message and by endpoint (keyset on id), and the two cascades.
CREATE INDEX attempts_by_message ON attempts (app_id, msg_id, id);
CREATE INDEX attempts_by_endpoint ON attempts (app_id, endpoint_id, id);
-- Retention: response bodies still held, oldest first.
CREATE INDEX attempts_with_response ON attempts (started_at) WHERE response <> '';
-- Retention: payloads still held, by expiry (the one index write this adds per new message).
CREATE INDEX messages_with_payload ON messages (payload_expires_at) WHERE payload IS NOT NULL;
