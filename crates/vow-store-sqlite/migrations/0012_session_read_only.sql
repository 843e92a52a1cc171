-- A read-only app-portal token (Svix's `readOnly`): it may read its application's routes but
-- change nothing. Console sessions are never read-only.
ALTER TABLE sessions ADD COLUMN read_only INTEGER NOT NULL DEFAULT 0
    CHECK (read_only IN (0, 1) AND (read_only = 0 OR kind = 'portal'));
