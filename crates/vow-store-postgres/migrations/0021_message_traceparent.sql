-- The W3C `traceparent` of the span that created each message (NULL outside any trace), so its
-- delivery attempts, in whichever process, join that trace and send it on to the endpoint.
ALTER TABLE messages ADD COLUMN traceparent TEXT;
