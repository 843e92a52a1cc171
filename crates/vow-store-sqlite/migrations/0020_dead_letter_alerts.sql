-- The dead-letter rate alert (vow_store::dead_letters). Times are microseconds since the epoch.
--
-- * One note per dead-lettered delivery, written by the record that dead-lettered it, in its
--   transaction: a window's count per endpoint is a range of `at`. Retention deletes notes older
--   than two days. A deleted endpoint's notes are left out by the read's join until retention
--   takes them.
-- * Each endpoint's alert: a row. A cleared alert keeps its row with `cleared_at`, so a check
--   that began before the clear (and so still counted the old dead-letters) cannot raise it
--   again.
CREATE TABLE dead_letter_notes (
    endpoint_id TEXT    NOT NULL,
    app_id      TEXT    NOT NULL,
    at          INTEGER NOT NULL
);
CREATE INDEX dead_letter_notes_at ON dead_letter_notes (at);

CREATE TABLE dead_letter_alerts (
    endpoint_id TEXT    NOT NULL PRIMARY KEY,
    app_id      TEXT    NOT NULL,
    raised_at   INTEGER NOT NULL,
    cleared_at  INTEGER,
    FOREIGN KEY (app_id, endpoint_id) REFERENCES endpoints (app_id, id) ON DELETE CASCADE
);
