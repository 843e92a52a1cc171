-- The next free send slot of each throttled endpoint (`throttleRate`), shared by every node: a
-- send reserves its slot here (vow_store::queue::DeliveryClaims::reserve_send_slot), so the
-- nodes together send at the endpoint's rate. A slot in the past reserves like no row at all.
CREATE TABLE endpoint_pace (
    endpoint_id TEXT COLLATE "C" NOT NULL PRIMARY KEY
        REFERENCES endpoints (id) ON DELETE CASCADE,
    next_slot   TIMESTAMPTZ NOT NULL
);
