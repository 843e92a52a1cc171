-- The dead-letter rate alert (vow_store::dead_letters). Forward-only (see 0001_init.sql for the
-- conventions).
--
-- * One note per dead-lettered delivery, written by the record that dead-lettered it, in its
--   transaction: a window's count per endpoint is a range of `at`. Retention deletes notes older
--   than two days. No key and no foreign key: nothing reads one note, and a deleted endpoint's
--   notes are left out by the read's join until retention takes them.
-- * Each endpoint's alert: a row, so several nodes raise and clear each once. A cleared alert
--   keeps its row with `cleared_at`, so a check that began before the clear (and so still
--   counted the old dead-letters) cannot raise it again.

CREATE TABLE dead_letter_notes (
    endpoint_id TEXT COLLATE "C" NOT NULL,
    app_id      TEXT COLLATE "C" NOT NULL,
    at          TIMESTAMPTZ NOT NULL
);
CREATE INDEX dead_letter_notes_at_idx ON dead_letter_notes (at);

CREATE TABLE dead_letter_alerts (
    endpoint_id TEXT COLLATE "C" NOT NULL,
    app_id      TEXT COLLATE "C" NOT NULL,
    raised_at   TIMESTAMPTZ NOT NULL,
    cleared_at  TIMESTAMPTZ,
    CONSTRAINT dead_letter_alerts_pkey PRIMARY KEY (endpoint_id),
    CONSTRAINT dead_letter_alerts_endpoint_fkey FOREIGN KEY (app_id, endpoint_id)
        REFERENCES endpoints (app_id, id) ON DELETE CASCADE
);
