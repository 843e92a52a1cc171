-- The replay guard of inbound sources (issue 13, ADR 7 "Replay guard";
-- vow_store::inbound::replay_guard).

-- Seconds a digest of accepted signed content refuses a delivery under another event id;
-- NULL = the scheme's default, 0 = off.
ALTER TABLE sources ADD COLUMN replay_window_secs INTEGER CHECK (replay_window_secs >= 0);

-- One row per (source, digest of the signed content) of an accepted delivery: the event it was
-- accepted as and when. A claim upserts it in its transaction: a concurrent claim of the same
-- digest waits on the primary key for the first to commit, then sees it, so under any race
-- one delivery of a content is accepted per window. The upsert's WHERE only moves a digest
-- whose window has passed, so a refused replay never extends the window.
CREATE TABLE inbound_digests (
    source_id TEXT COLLATE "C" NOT NULL,
    digest    TEXT COLLATE "C" NOT NULL,
    event_id  TEXT COLLATE "C" NOT NULL,
    seen_at   TIMESTAMPTZ NOT NULL,
    CONSTRAINT inbound_digests_pkey PRIMARY KEY (source_id, digest),
    CONSTRAINT inbound_digests_source_fkey FOREIGN KEY (source_id)
        REFERENCES sources (id) ON DELETE CASCADE
);
