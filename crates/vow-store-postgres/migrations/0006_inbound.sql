-- Inbound webhooks (issue 5, ADR 7): sources providers send to, the events claimed from them,
-- and the requests refused.
--
-- The claim rule lives in two partial unique indexes on inbound_events:
-- * inbound_events_claim: one row per (source, account, event id) holds the claim (its
--   `conflicts_with` is NULL). The claiming INSERT targets it with ON CONFLICT DO NOTHING, so
--   under any race (across processes too: a concurrent insert of the same key waits for the
--   first to commit) exactly one delivery of an id becomes that row. Rows without an event id
--   (NULL) never conflict: they are never deduplicated.
-- * inbound_events_quarantine: a different payload under a claimed id is its own row, pointing
--   at the claim (`conflicts_with`); each distinct payload at most once.

CREATE TABLE sources (
    id              TEXT COLLATE "C" NOT NULL,
    -- The unguessable token of `POST /in/t/{token}`.
    token           TEXT NOT NULL,
    description     TEXT NOT NULL,
    -- vow_signature's scheme name (`stripe`, `github`, ..., `hmac`).
    scheme          TEXT NOT NULL,
    -- The generic HMAC's settings; NULL for the named schemes.
    hmac            JSONB,
    -- Secrets, newest first.
    secrets         JSONB NOT NULL,
    tolerance_secs  INTEGER NOT NULL CHECK (tolerance_secs >= 0),
    -- Locators ({"header": ...} or {"pointer": ...}); NULL = the scheme's default.
    event_id        JSONB,
    account         JSONB,
    version_pointer TEXT,
    entity_pointer  TEXT,
    -- [{id, url, secret, idempotent}].
    destinations    JSONB NOT NULL,
    created_at      TIMESTAMPTZ NOT NULL,
    updated_at      TIMESTAMPTZ NOT NULL,
    CONSTRAINT sources_pkey PRIMARY KEY (id),
    CONSTRAINT sources_token_key UNIQUE (token)
);

CREATE TABLE inbound_events (
    id             TEXT COLLATE "C" NOT NULL,
    source_id      TEXT COLLATE "C" NOT NULL,
    -- The event id's scope within the source; '' when the provider has none.
    account        TEXT NOT NULL,
    -- The provider's event id; NULL = none found (stored, never deduplicated).
    event_id       TEXT,
    -- NULL for a claim (or an id-less row); the claim's id for a quarantined payload.
    conflicts_with TEXT COLLATE "C",
    -- 'received', 'quarantined', 'discarded' (the processing slice adds more).
    state          TEXT NOT NULL,
    -- Lowercase hex SHA-256 of the payload.
    sha256         TEXT NOT NULL,
    size           BIGINT NOT NULL CHECK (size >= 0),
    -- The exact body bytes and the headers ([[name, value], ...], no credentials or
    -- signatures); both NULL once retention removed them.
    payload        BYTEA,
    headers        JSONB,
    version        TEXT,
    entity         TEXT,
    duplicates     BIGINT NOT NULL DEFAULT 0,
    received_at    TIMESTAMPTZ NOT NULL,
    updated_at     TIMESTAMPTZ NOT NULL,
    CONSTRAINT inbound_events_pkey PRIMARY KEY (id),
    CONSTRAINT inbound_events_source_fkey FOREIGN KEY (source_id)
        REFERENCES sources (id) ON DELETE CASCADE
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
    id          TEXT COLLATE "C" NOT NULL,
    source_id   TEXT COLLATE "C" NOT NULL,
    -- vow_signature's reason code, or `body_too_large` / `unreadable_body`.
    reason      TEXT NOT NULL,
    status      INTEGER NOT NULL CHECK (status BETWEEN 0 AND 65535),
    body_size   BIGINT NOT NULL CHECK (body_size >= 0),
    received_at TIMESTAMPTZ NOT NULL,
    CONSTRAINT inbound_rejections_pkey PRIMARY KEY (id),
    CONSTRAINT inbound_rejections_source_fkey FOREIGN KEY (source_id)
        REFERENCES sources (id) ON DELETE CASCADE
);

CREATE INDEX inbound_rejections_by_source ON inbound_rejections (source_id, id);
CREATE INDEX inbound_rejections_by_time ON inbound_rejections (received_at);
