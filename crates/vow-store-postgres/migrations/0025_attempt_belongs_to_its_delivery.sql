-- vow's PostgreSQL schema: an attempt refers to its delivery, not to its application, message
-- and endpoint. Forward-only (see 0001_init.sql for the conventions).
--
-- Recording an attempt checked three foreign keys, each a query that key-share locks the row
-- it finds: the application's and the endpoint's rows were locked by every recording at once
-- (a WAL record each, and a multixact when two overlap), the message's by each of its
-- deliveries' recordings (issue 18). One key to the delivery guards what they guarded: the
-- delivery refers to its message and endpoint, the message to its application, and an attempt
-- still goes with any of them, through the delivery's cascade. Its check finds a row the
-- recording has already locked and updated in the same statement, so it locks nothing more.
-- The key is the delivery's id: its check can only be planned on the primary key (a key on
-- (msg_id, endpoint_id) was planned on the endpoint's index when the table was empty, and each
-- connection kept that plan). The attempt's app_id, msg_id and endpoint_id are the delivery's,
-- copied by the one statement that writes attempts.
--
-- The cascade finds a delivery's attempts by delivery_id, through the index that replaces
-- (app_id, msg_id, id): a message's attempts are its deliveries' (a message has one per
-- endpoint). Building it holds off writes to attempts while it reads the table, once, as vow
-- starts, and adding the key reads every attempt once.
CREATE INDEX attempts_delivery_id_idx ON attempts (delivery_id);
DROP INDEX attempts_app_id_msg_id_id_idx;
ALTER TABLE attempts
    DROP CONSTRAINT attempts_app_id_fkey,
    DROP CONSTRAINT attempts_message_fkey,
    DROP CONSTRAINT attempts_endpoint_fkey,
    ADD CONSTRAINT attempts_delivery_fkey FOREIGN KEY (delivery_id)
        REFERENCES deliveries (id) ON DELETE CASCADE;
