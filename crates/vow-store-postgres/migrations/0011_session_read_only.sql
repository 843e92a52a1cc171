-- A read-only app-portal token (Svix's `readOnly`): it may read its application's routes but
-- change nothing. Console sessions are never read-only.
ALTER TABLE sessions
    ADD COLUMN read_only BOOLEAN NOT NULL DEFAULT FALSE,
    ADD CHECK (NOT read_only OR kind = 'portal');
