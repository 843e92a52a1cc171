-- Inbound webhooks (issue 5, ADR 7): sources providers send to, the events claimed from them,
-- and the requests refused.
--
-- The claim rule lives in two partial unique indexes on inbound_events:
-- * inbound_events_claim: one row per (source, account, event id) holds the claim (its
--   `conflicts_with` is NULL). The claiming INSERT targets it with ON CONFLICT DO NOTHING, so
--   under any race exactly one delivery of an id becomes that row. Rows without an event id
--   (NULL) never conflict: they are never deduplicated.
-- * inbound_events_quarantine: a different payload under a claimed id is its own row, pointing
--   at the claim (`conflicts_with`); each distinct payload at most once.

CREATE TABLE sources (
    id              TEXT    NOT NULL PRIMARY KEY,
    -- The unguessable token of `POST /in/t/{token}`.
    token           TEXT    NOT NULL UNIQUE,
    description     TEXT    NOT NULL,
    -- vow_signature's scheme name (`stripe`, `github`, ..., `hmac`).
    scheme          TEXT    NOT NULL,
    -- JSON: the generic HMAC's settings; NULL for the named schemes.
    hmac            TEXT,
    -- JSON array of secrets, newest first.
    secrets         TEXT    NOT NULL,
    tolerance_secs  INTEGER NOT NULL,
    -- JSON locators ({"header": ...} or {"pointer": ...}); NULL = the scheme's default.
    event_id        TEXT,
    account         TEXT,
    version_pointer TEXT,
    entity_pointer  TEXT,
    -- JSON array of {id, url, secret, idempotent}.
    destinations    TEXT    NOT NULL,
    created_at      INTEGER NOT NULL,
    updated_at      INTEGER NOT NULL
);

CREATE TABLE inbound_events (
    id             TEXT    NOT NULL PRIMARY KEY,
    source_id      TEXT    NOT NULL REFERENCES sources (id) ON DELETE CASCADE,
    -- The event id's scope within the source; '' when the provider has none.
    account        TEXT    NOT NULL,
    -- The provider's event id; NULL = none found (stored, never deduplicated).
    event_id       TEXT,
    -- NULL for a claim (or an id-less row); the claim's id for a quarantined payload.
    conflicts_with TEXT,
    -- 'received', 'quarantined', 'discarded' (the processing slice adds more).
    state          TEXT    NOT NULL,
    -- Lowercase hex SHA-256 of the payload.
    sha256         TEXT    NOT NULL,
    size           INTEGER NOT NULL,
    -- The exact body bytes and the headers (JSON pairs, no credentials or signatures);
    -- both NULL once retention removed them.
    payload        BLOB,
    headers        TEXT,
    version        TEXT,
    entity         TEXT,
    duplicates     INTEGER NOT NULL DEFAULT 0,
    received_at    INTEGER NOT NULL,
    updated_at     INTEGER NOT NULL
);

CREATE UNIQUE INDEX inbound_events_claim ON inbound_events (source_id, account, event_id)
    WHERE conflicts_with IS NULL;
CREATE UNIQUE INDEX inbound_events_quarantine
    ON inbound_events (source_id, account, event_id, sha256)
    WHERE conflicts_with IS NOT NULL;
-- Listings of a source's events (keyset on id), with and without a state; the cascade.
CREATE INDEX inbound_events_by_source ON inbound_events (source_id, id);
CREATE INDEX inbound_events_by_state ON inbound_events (source_id, state, id);
-- Retention: content still held, oldest first.
CREATE INDEX inbound_events_with_payload ON inbound_events (received_at)
    WHERE payload IS NOT NULL;

CREATE TABLE inbound_rejections (
    id          TEXT    NOT NULL PRIMARY KEY,
    source_id   TEXT    NOT NULL REFERENCES sources (id) ON DELETE CASCADE,
    -- vow_signature's reason code, or `body_too_large` / `unreadable_body`.
    reason      TEXT    NOT NULL,
    status      INTEGER NOT NULL,
    body_size   INTEGER NOT NULL,
    received_at INTEGER NOT NULL
);

CREATE INDEX inbound_rejections_by_source ON inbound_rejections (source_id, id);
CREATE INDEX inbound_rejections_by_time ON inbound_rejections (received_at);
