-- The messages search (console, portal, `GET …/msg`) by event type and by channel as index
-- ranges. Before, a search for an event type or a channel that few messages carry read every
-- message of the application (58 ms for 10,000 messages, more while deliveries drain).
-- (An endpoint's dead letters were indexed already: `deliveries_by_endpoint` from 0002.)

-- An application's messages of one event type, newest first: one more index entry per message.
CREATE INDEX messages_by_event_type ON messages (app_id, event_type, id);

-- Each message's channels, one row per channel (a message has at most five), written with the
-- message in the same transaction. Keyed for the search (an application's messages in one
-- channel, newest first); the second index serves the cascade when a message goes.
CREATE TABLE message_channels (
    app_id  TEXT NOT NULL,
    channel TEXT NOT NULL,
    msg_id  TEXT NOT NULL,
    PRIMARY KEY (app_id, channel, msg_id),
    FOREIGN KEY (app_id, msg_id) REFERENCES messages (app_id, id) ON DELETE CASCADE
) WITHOUT ROWID;
CREATE INDEX message_channels_by_message ON message_channels (app_id, msg_id);

INSERT INTO message_channels (app_id, channel, msg_id)
    SELECT DISTINCT m.app_id, c.value, m.id
    FROM messages AS m, json_each(m.channels) AS c
    WHERE m.channels IS NOT NULL;
