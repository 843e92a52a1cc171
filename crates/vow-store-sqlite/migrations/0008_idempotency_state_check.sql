-- The record table again, with its `state` check written as comparisons: SQLite evaluates
-- `state IN ('in_progress', 'completed', 'tombstone')` by building a temporary b-tree of the three
-- values for every row it writes, which was a fifth of a keyed message create's record insert.
-- The rows, the columns and what the check allows are unchanged. The table and its indexes are
-- vow_idempotency::sqlite::SCHEMA, copied; a test checks this file holds all of it.
DROP INDEX IF EXISTS idempotency_records_expires_at;
DROP INDEX IF EXISTS idempotency_records_tombstone_until;
DROP INDEX IF EXISTS idempotency_records_in_progress;
ALTER TABLE idempotency_records RENAME TO idempotency_records_0004;
CREATE TABLE IF NOT EXISTS idempotency_records (
    principal           TEXT    NOT NULL,
    application         TEXT    NOT NULL,
    method              TEXT    NOT NULL,
    route               TEXT    NOT NULL,
    key                 TEXT    NOT NULL,
    state               TEXT    NOT NULL
                        CHECK (state = 'in_progress' OR state = 'completed' OR state = 'tombstone'),
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
INSERT INTO idempotency_records SELECT * FROM idempotency_records_0004;
DROP TABLE idempotency_records_0004;
CREATE INDEX IF NOT EXISTS idempotency_records_expires_at
    ON idempotency_records (expires_at);
CREATE INDEX IF NOT EXISTS idempotency_records_tombstone_until
    ON idempotency_records (tombstone_until);
CREATE INDEX IF NOT EXISTS idempotency_records_in_progress
    ON idempotency_records (lease_until) WHERE state = 'in_progress';
