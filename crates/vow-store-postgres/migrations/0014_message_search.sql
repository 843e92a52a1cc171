-- vow's PostgreSQL schema: the messages search (console, portal, `GET …/msg`) by event type and
-- by channel as index ranges. Forward-only (see 0001_init.sql for the conventions). Before, a
-- search for an event type or a channel that few messages carry read every message of the
-- application.

-- An application's messages of one event type, newest first: one more index entry per message.
CREATE INDEX messages_app_id_event_type_id_idx ON messages (app_id, event_type, id);

-- Each message's channels, one row per channel (a message has at most five), written with the
-- message in the same statement. Keyed for the search (an application's messages in one channel,
-- newest first); the second index serves the cascade when a message goes.
CREATE TABLE message_channels (
    app_id  TEXT COLLATE "C" NOT NULL,
    channel TEXT COLLATE "C" NOT NULL,
    msg_id  TEXT COLLATE "C" NOT NULL,
    CONSTRAINT message_channels_pkey PRIMARY KEY (app_id, channel, msg_id),
    CONSTRAINT message_channels_message_fkey FOREIGN KEY (app_id, msg_id)
        REFERENCES messages (app_id, id) ON DELETE CASCADE
);
CREATE INDEX message_channels_app_id_msg_id_idx ON message_channels (app_id, msg_id);

INSERT INTO message_channels (app_id, channel, msg_id)
    SELECT DISTINCT app_id, unnest(channels), id FROM messages WHERE channels IS NOT NULL;
