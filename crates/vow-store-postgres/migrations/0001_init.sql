-- vow's PostgreSQL schema, version 1. Forward-only: never edit a migration once released, add one.
--
-- Conventions:
-- * Ids are the `<prefix>_<ULID>` text of vow-core, which sorts by creation time. Key columns use
--   COLLATE "C" so `ORDER BY` and keyset comparisons (`id > $1`) are byte order whatever the
--   database's default collation is.
-- * Every row under an application carries `app_id` and goes when its application goes
--   (ON DELETE CASCADE); composite foreign keys keep a row under the same application as its
--   parents.
-- * Constraint names are spelled out: the Rust side maps them to conflict messages
--   (src/error.rs), so renaming one here means updating it there.

CREATE TABLE settings (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
);

CREATE TABLE applications (
    id            TEXT COLLATE "C" NOT NULL,
    uid           TEXT,
    name          TEXT NOT NULL,
    throttle_rate INTEGER CHECK (throttle_rate BETWEEN 0 AND 65535),
    metadata      JSONB NOT NULL DEFAULT '{}',
    created_at    TIMESTAMPTZ NOT NULL,
    updated_at    TIMESTAMPTZ NOT NULL,
    CONSTRAINT applications_pkey PRIMARY KEY (id),
    CONSTRAINT applications_uid_key UNIQUE (uid)
);

CREATE TABLE event_types (
    name         TEXT COLLATE "C" NOT NULL,
    description  TEXT NOT NULL,
    archived     BOOLEAN NOT NULL DEFAULT FALSE,
    deprecated   BOOLEAN NOT NULL DEFAULT FALSE,
    feature_flag TEXT,
    schemas      JSONB,
    created_at   TIMESTAMPTZ NOT NULL,
    updated_at   TIMESTAMPTZ NOT NULL,
    CONSTRAINT event_types_pkey PRIMARY KEY (name)
);

CREATE TABLE endpoints (
    id            TEXT COLLATE "C" NOT NULL,
    app_id        TEXT COLLATE "C" NOT NULL,
    uid           TEXT,
    url           TEXT NOT NULL,
    description   TEXT NOT NULL,
    disabled      BOOLEAN NOT NULL DEFAULT FALSE,
    -- NULL = no filter (everything); an empty array matches nothing.
    event_types   TEXT[],
    channels      TEXT[],
    throttle_rate INTEGER CHECK (throttle_rate BETWEEN 0 AND 65535),
    metadata      JSONB NOT NULL DEFAULT '{}',
    headers       JSONB NOT NULL DEFAULT '{}',
    created_at    TIMESTAMPTZ NOT NULL,
    updated_at    TIMESTAMPTZ NOT NULL,
    CONSTRAINT endpoints_pkey PRIMARY KEY (id),
    CONSTRAINT endpoints_app_id_fkey FOREIGN KEY (app_id)
        REFERENCES applications (id) ON DELETE CASCADE,
    CONSTRAINT endpoints_app_id_uid_key UNIQUE (app_id, uid),
    -- Listing an application's endpoints by id; also the target of the composite foreign keys.
    CONSTRAINT endpoints_app_id_id_key UNIQUE (app_id, id)
);

CREATE TABLE endpoint_secrets (
    -- Insertion order: the newest secret has the largest seq.
    seq         BIGINT GENERATED ALWAYS AS IDENTITY,
    app_id      TEXT COLLATE "C" NOT NULL,
    endpoint_id TEXT COLLATE "C" NOT NULL,
    key         TEXT NOT NULL,
    -- NULL for the current secret; the end of its grace period once rotated out.
    valid_until TIMESTAMPTZ,
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    CONSTRAINT endpoint_secrets_pkey PRIMARY KEY (seq),
    CONSTRAINT endpoint_secrets_endpoint_fkey FOREIGN KEY (app_id, endpoint_id)
        REFERENCES endpoints (app_id, id) ON DELETE CASCADE
);
-- At most one current secret per endpoint.
CREATE UNIQUE INDEX endpoint_secrets_current_key
    ON endpoint_secrets (endpoint_id) WHERE valid_until IS NULL;
CREATE INDEX endpoint_secrets_endpoint_id_seq_idx ON endpoint_secrets (endpoint_id, seq);

CREATE TABLE messages (
    id                 TEXT COLLATE "C" NOT NULL,
    app_id             TEXT COLLATE "C" NOT NULL,
    event_id           TEXT,
    event_type         TEXT NOT NULL,
    -- NULL when the client gave none.
    channels           TEXT[],
    -- The payload exactly as the client sent it (TEXT, not JSONB: JSONB would reorder keys).
    -- NULL once expunged.
    payload            TEXT,
    payload_expires_at TIMESTAMPTZ NOT NULL,
    created_at         TIMESTAMPTZ NOT NULL,
    CONSTRAINT messages_pkey PRIMARY KEY (id),
    CONSTRAINT messages_app_id_fkey FOREIGN KEY (app_id)
        REFERENCES applications (id) ON DELETE CASCADE,
    CONSTRAINT messages_app_id_event_id_key UNIQUE (app_id, event_id),
    -- Listing an application's messages by id; also the target of the deliveries' foreign key.
    CONSTRAINT messages_app_id_id_key UNIQUE (app_id, id)
);

CREATE TABLE deliveries (
    id              TEXT COLLATE "C" NOT NULL,
    app_id          TEXT COLLATE "C" NOT NULL,
    msg_id          TEXT COLLATE "C" NOT NULL,
    endpoint_id     TEXT COLLATE "C" NOT NULL,
    status          TEXT NOT NULL
        CHECK (status IN ('pending', 'held', 'delivered', 'dead_lettered')),
    attempts        INTEGER NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    next_attempt_at TIMESTAMPTZ NOT NULL,
    created_at      TIMESTAMPTZ NOT NULL,
    CONSTRAINT deliveries_pkey PRIMARY KEY (id),
    CONSTRAINT deliveries_message_fkey FOREIGN KEY (app_id, msg_id)
        REFERENCES messages (app_id, id) ON DELETE CASCADE,
    CONSTRAINT deliveries_endpoint_fkey FOREIGN KEY (app_id, endpoint_id)
        REFERENCES endpoints (app_id, id) ON DELETE CASCADE,
    CONSTRAINT deliveries_msg_id_endpoint_id_key UNIQUE (msg_id, endpoint_id)
);
-- What the delivery workers claim: due rows of a status, oldest due first.
CREATE INDEX deliveries_status_next_attempt_at_idx ON deliveries (status, next_attempt_at);
-- Deleting an endpoint cascades here.
CREATE INDEX deliveries_endpoint_id_idx ON deliveries (endpoint_id);
