-- When each `vow listen` target (a relay endpoint, or a relay destination of a source) last had
-- its listener connected (vow_store::relay), so any node expires the ones whose listener is gone,
-- whichever node held it. Relay endpoints made before this start the clock now.
CREATE TABLE relay_listeners (
    id       TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    kind     TEXT NOT NULL CHECK (kind IN ('endpoint', 'destination')),
    owner_id TEXT COLLATE "C" NOT NULL,
    seen_at  TIMESTAMPTZ NOT NULL
);
CREATE INDEX relay_listeners_seen_at ON relay_listeners (seen_at);

INSERT INTO relay_listeners (id, kind, owner_id, seen_at)
SELECT id, 'endpoint', app_id, now() FROM endpoints WHERE url = 'relay://listen';
