-- The replay guard of inbound sources (issue 13, ADR 7 "Replay guard";
-- vow_store::inbound::replay_guard).

-- Seconds a digest of accepted signed content refuses a delivery under another event id;
-- NULL = the scheme's default, 0 = off.
ALTER TABLE sources ADD COLUMN replay_window_secs INTEGER CHECK (replay_window_secs >= 0);

-- One row per (source, digest of the signed content) of an accepted delivery: the event it was
-- accepted as and when (micros). A claim upserts it; the upsert's WHERE only moves a digest
-- whose window has passed, so a refused replay never extends the window.
CREATE TABLE inbound_digests (
    source_id TEXT    NOT NULL REFERENCES sources (id) ON DELETE CASCADE,
    digest    TEXT    NOT NULL,
    event_id  TEXT    NOT NULL,
    seen_at   INTEGER NOT NULL,
    PRIMARY KEY (source_id, digest)
) WITHOUT ROWID;
