-- Console sessions and app-portal tokens (vow_store::session): stored by the SHA-256 of the
-- secret the client holds. A portal session goes with its application.
CREATE TABLE sessions (
    id_hash    TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    kind       TEXT NOT NULL CHECK (kind IN ('console', 'portal')),
    app_id     TEXT COLLATE "C" REFERENCES applications (id) ON DELETE CASCADE,
    csrf       TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL,
    CHECK ((kind = 'portal') = (app_id IS NOT NULL))
);
CREATE INDEX sessions_expires_at ON sessions (expires_at);
CREATE INDEX sessions_app_id ON sessions (app_id) WHERE app_id IS NOT NULL;
