-- The claims still in progress, oldest first, for the "stuck requests" gauge on /metrics
-- (part of vow_idempotency::sqlite::SCHEMA; a test checks the migrations hold all of it).
CREATE INDEX IF NOT EXISTS idempotency_records_in_progress
    ON idempotency_records (lease_until) WHERE state = 'in_progress';
