-- Idempotency-Key records (ADR 6): vow_idempotency::sqlite::SCHEMA, copied; a test checks they
-- match.
CREATE TABLE IF NOT EXISTS idempotency_records (
    principal           TEXT    NOT NULL,
    application         TEXT    NOT NULL,
    method              TEXT    NOT NULL,
    route               TEXT    NOT NULL,
    key                 TEXT    NOT NULL,
    state               TEXT    NOT NULL
                        CHECK (state IN ('in_progress', 'completed', 'tombstone')),
    fingerprint_version INTEGER NOT NULL,
    fingerprint         TEXT    NOT NULL,
    canonical_body      TEXT,
    lease_token         TEXT    NOT NULL,
    lease_until         INTEGER NOT NULL,
    response_status     INTEGER,
    response_headers    TEXT,
    response_body       BLOB,
    resource            TEXT,
    expires_at          INTEGER NOT NULL,
    tombstone_until     INTEGER NOT NULL,
    PRIMARY KEY (principal, application, method, route, key)
);
CREATE INDEX IF NOT EXISTS idempotency_records_expires_at
    ON idempotency_records (expires_at);
CREATE INDEX IF NOT EXISTS idempotency_records_tombstone_until
    ON idempotency_records (tombstone_until);
