-- Idempotency-Key records (ADR 6): vow_idempotency::postgres::SCHEMA, copied; a test checks they
-- match.
CREATE TABLE IF NOT EXISTS idempotency_records (
    principal           text        NOT NULL,
    application         text        NOT NULL,
    method              text        NOT NULL,
    route               text        NOT NULL,
    key                 text        NOT NULL,
    state               text        NOT NULL
                        CHECK (state IN ('in_progress', 'completed', 'tombstone')),
    fingerprint_version integer     NOT NULL,
    fingerprint         text        NOT NULL,
    canonical_body      text,
    lease_token         text        NOT NULL,
    lease_until         timestamptz NOT NULL,
    response_status     integer,
    response_headers    text,
    response_body       bytea,
    resource            text,
    expires_at          timestamptz NOT NULL,
    tombstone_until     timestamptz NOT NULL,
    PRIMARY KEY (principal, application, method, route, key)
);
CREATE INDEX IF NOT EXISTS idempotency_records_expires_at
    ON idempotency_records (expires_at);
CREATE INDEX IF NOT EXISTS idempotency_records_tombstone_until
    ON idempotency_records (tombstone_until);
