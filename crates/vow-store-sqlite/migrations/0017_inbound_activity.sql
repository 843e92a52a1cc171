-- `vow tail --source` (vow_store::inbound::activity): a source's activity read by the time
-- each row was written, then its ids, one index range per table.
CREATE INDEX inbound_events_by_arrival ON inbound_events (source_id, received_at, id);
CREATE INDEX inbound_rejections_by_arrival ON inbound_rejections (source_id, received_at, id);
-- A forward has no source: the range is every source's outcomes since the cursor, each joined
-- to its event for the source.
CREATE INDEX inbound_forwards_by_time ON inbound_forwards (updated_at, event_id, destination);
