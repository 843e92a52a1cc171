-- When each `vow listen` target (a relay endpoint, or a relay destination of a source) last had
-- its listener connected (vow_store::relay), so any node expires the ones whose listener is gone.
-- `seen_at` is in microseconds since the epoch. Relay endpoints made before this start the clock
-- now.
CREATE TABLE relay_listeners (
    id       TEXT    NOT NULL PRIMARY KEY,
    kind     TEXT    NOT NULL CHECK (kind IN ('endpoint', 'destination')),
    owner_id TEXT    NOT NULL,
    seen_at  INTEGER NOT NULL
);
CREATE INDEX relay_listeners_seen_at ON relay_listeners (seen_at);

INSERT INTO relay_listeners (id, kind, owner_id, seen_at)
SELECT id, 'endpoint', app_id, CAST((julianday('now') - 2440587.5) * 86400000000.0 AS INTEGER)
FROM endpoints WHERE url = 'relay://listen';
