-- vow's PostgreSQL schema, version 2: the delivery queue. Forward-only (see 0001_init.sql for the
-- conventions).
--
-- * Endpoints carry their delivery options and the count of consecutive dead-lettered deliveries
--   that drives auto-disabling.
-- * Deliveries carry a lease (token + end) for the workers that claim them, the client-error count
--   and last status of the current run of the schedule, and why they were dead-lettered.
-- * Attempts are one row per HTTP request made for a delivery.

ALTER TABLE endpoints
    -- vow_core::SignatureStyle's stored name.
    ADD COLUMN signature_style          TEXT NOT NULL DEFAULT 'standard-webhooks',
    -- NULL = the server's default.
    ADD COLUMN timeout_ms               INTEGER CHECK (timeout_ms >= 0),
    -- vow_core::RetrySchedule's Display form; NULL = the server's default.
    ADD COLUMN retry_schedule           TEXT,
    ADD COLUMN consecutive_dead_letters INTEGER NOT NULL DEFAULT 0
        CHECK (consecutive_dead_letters >= 0);

ALTER TABLE deliveries
    -- Both NULL when no worker holds the delivery; a claim sets both, a record clears both.
    ADD COLUMN lease_token        TEXT,
    ADD COLUMN lease_until        TIMESTAMPTZ,
    ADD COLUMN client_errors      INTEGER NOT NULL DEFAULT 0 CHECK (client_errors >= 0),
    ADD COLUMN last_status        INTEGER CHECK (last_status BETWEEN 0 AND 65535),
    ADD COLUMN dead_letter_reason TEXT,
    -- NULL until the delivery first changes after its creation.
    ADD COLUMN updated_at         TIMESTAMPTZ;

-- What the workers claim: due pending rows, oldest due first. Only the backlog is indexed, not the
-- (much larger) history of delivered and dead-lettered rows. Lease columns are deliberately not
-- indexed, so a claim (which only sets them) can be a HOT update.
CREATE INDEX deliveries_pending_next_attempt_at_idx
    ON deliveries (next_attempt_at) WHERE status = 'pending';
-- 0001's claim index is superseded by the partial one above and served no other query; every
-- index on deliveries is one more write per delivery, so it goes.
DROP INDEX deliveries_status_next_attempt_at_idx;
-- An endpoint's deliveries by status and creation time: disabling (its pending rows to held),
-- replay (its dead-lettered and held rows in a time range) and stats read a range of it instead
-- of the endpoint's whole history. Still serves the cascade from endpoints, so it replaces 0001's
-- (endpoint_id) index.
CREATE INDEX deliveries_endpoint_id_status_created_at_idx
    ON deliveries (endpoint_id, status, created_at);
DROP INDEX deliveries_endpoint_id_idx;

-- Retention: payloads not yet cleared, by expiry.
CREATE INDEX messages_payload_expires_at_idx
    ON messages (payload_expires_at) WHERE payload IS NOT NULL;

CREATE TABLE attempts (
    id              TEXT COLLATE "C" NOT NULL,
    app_id          TEXT COLLATE "C" NOT NULL,
    msg_id          TEXT COLLATE "C" NOT NULL,
    endpoint_id     TEXT COLLATE "C" NOT NULL,
    -- The delivery (message, endpoint) it was made for; it goes with its message or endpoint.
    delivery_id     TEXT COLLATE "C" NOT NULL,
    started_at      TIMESTAMPTZ NOT NULL,
    url             TEXT NOT NULL,
    -- NULL when no response arrived.
    response_status INTEGER CHECK (response_status BETWEEN 0 AND 65535),
    -- Up to 4 KiB of the response body or the error text; '' once expunged or purged.
    response        TEXT NOT NULL,
    duration_ms     BIGINT NOT NULL CHECK (duration_ms >= 0),
    success         BOOLEAN NOT NULL,
    error           TEXT,
    trigger         TEXT NOT NULL CHECK (trigger IN ('scheduled', 'manual')),
    CONSTRAINT attempts_pkey PRIMARY KEY (id),
    CONSTRAINT attempts_app_id_fkey FOREIGN KEY (app_id)
        REFERENCES applications (id) ON DELETE CASCADE,
    CONSTRAINT attempts_message_fkey FOREIGN KEY (app_id, msg_id)
        REFERENCES messages (app_id, id) ON DELETE CASCADE,
    CONSTRAINT attempts_endpoint_fkey FOREIGN KEY (app_id, endpoint_id)
        REFERENCES endpoints (app_id, id) ON DELETE CASCADE
);
-- Listing a message's attempts by id; also serves the message and application cascades.
CREATE INDEX attempts_app_id_msg_id_id_idx ON attempts (app_id, msg_id, id);
-- Listing an endpoint's attempts by id; also serves the endpoint cascade.
CREATE INDEX attempts_app_id_endpoint_id_id_idx ON attempts (app_id, endpoint_id, id);
-- Listing an application's attempts by id, unfiltered.
CREATE INDEX attempts_app_id_id_idx ON attempts (app_id, id);
-- Retention: response bodies not yet cleared, by age.
CREATE INDEX attempts_started_at_idx ON attempts (started_at) WHERE response <> '';
