-- vow's first schema.
--
-- Ids are TEXT (`app_…`, ULID-based, so they sort by creation time); times are INTEGER
-- microseconds since the Unix epoch; lists and maps are JSON text; a message payload is TEXT
-- exactly as the client sent it. Deleting an application cascades to everything under it:
-- endpoints (and their secrets), messages, and deliveries (through both their message and their
-- endpoint).

CREATE TABLE applications (
    id            TEXT    NOT NULL PRIMARY KEY,
    uid           TEXT    UNIQUE,
    name          TEXT    NOT NULL,
    throttle_rate INTEGER,
    metadata      TEXT    NOT NULL,
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL
);

CREATE TABLE event_types (
    name         TEXT    NOT NULL PRIMARY KEY,
    description  TEXT    NOT NULL,
    archived     INTEGER NOT NULL,
    deprecated   INTEGER NOT NULL,
    feature_flag TEXT,
    schemas      TEXT,
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL
);

CREATE TABLE endpoints (
    id            TEXT    NOT NULL PRIMARY KEY,
    app_id        TEXT    NOT NULL REFERENCES applications (id) ON DELETE CASCADE,
    uid           TEXT,
    url           TEXT    NOT NULL,
    description   TEXT    NOT NULL,
    disabled      INTEGER NOT NULL,
    event_types   TEXT,
    channels      TEXT,
    throttle_rate INTEGER,
    metadata      TEXT    NOT NULL,
    headers       TEXT    NOT NULL,
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL,
    UNIQUE (app_id, uid),
    -- The parent key of deliveries' (app_id, endpoint_id): a delivery cannot point at an
    -- endpoint of another application. Also serves listings by application.
    UNIQUE (app_id, id)
);

CREATE TABLE endpoint_secrets (
    -- Insertion order: the largest seq is the newest secret.
    seq         INTEGER PRIMARY KEY,
    endpoint_id TEXT    NOT NULL REFERENCES endpoints (id) ON DELETE CASCADE,
    key         TEXT    NOT NULL,
    -- NULL for the current secret; the end of the grace period for a rotated-out one.
    valid_until INTEGER
);

CREATE INDEX endpoint_secrets_by_endpoint ON endpoint_secrets (endpoint_id, seq);
-- At most one current secret per endpoint.
CREATE UNIQUE INDEX endpoint_secrets_one_current ON endpoint_secrets (endpoint_id)
    WHERE valid_until IS NULL;

-- Every lookup is scoped by application, so (app_id, id) is the key: it serves gets, listings
-- (newest first) and the parent key of deliveries' (app_id, msg_id), in one index.
CREATE TABLE messages (
    id                 TEXT    NOT NULL,
    app_id             TEXT    NOT NULL REFERENCES applications (id) ON DELETE CASCADE,
    event_id           TEXT,
    event_type         TEXT    NOT NULL,
    channels           TEXT,
    payload            TEXT,
    payload_expires_at INTEGER NOT NULL,
    created_at         INTEGER NOT NULL,
    PRIMARY KEY (app_id, id),
    UNIQUE (app_id, event_id)
);

-- Small rows looked up by id: clustered on the primary key.
CREATE TABLE deliveries (
    id              TEXT    NOT NULL PRIMARY KEY,
    app_id          TEXT    NOT NULL,
    msg_id          TEXT    NOT NULL,
    endpoint_id     TEXT    NOT NULL,
    status          TEXT    NOT NULL,
    attempts        INTEGER NOT NULL,
    next_attempt_at INTEGER NOT NULL,
    created_at      INTEGER NOT NULL,
    FOREIGN KEY (app_id, msg_id) REFERENCES messages (app_id, id) ON DELETE CASCADE,
    FOREIGN KEY (app_id, endpoint_id) REFERENCES endpoints (app_id, id) ON DELETE CASCADE
) WITHOUT ROWID;

-- One delivery per (message, endpoint); serves `list_deliveries` and the cascade from messages.
CREATE UNIQUE INDEX deliveries_by_message ON deliveries (app_id, msg_id, endpoint_id);
-- The cascade from endpoints.
CREATE INDEX deliveries_by_endpoint ON deliveries (app_id, endpoint_id);
-- What the delivery workers claim: due rows of a status, oldest first.
CREATE INDEX deliveries_due ON deliveries (status, next_attempt_at);

CREATE TABLE settings (
    key   TEXT NOT NULL PRIMARY KEY,
    value TEXT NOT NULL
);
