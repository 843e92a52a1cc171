-- vow's PostgreSQL schema: wide values are compressed with lz4 where the server has it.
-- Forward-only (see 0001_init.sql for the conventions).
--
-- PostgreSQL compresses a row's wide values when the row passes about 2 KB, with pglz unless a
-- column says otherwise. A keyed create's record holds the request's canonical body and the
-- stored answer, which carries the payload: with a 1 KiB payload the row passes 2 KB, and
-- compressing both with pglz cost PostgreSQL about 11 µs a keyed create more than lz4 does
-- (issue 18; BENCHMARKS.md, twenty-ninth part). lz4 compresses and decompresses the same values
-- several times faster. The same holds for the other values vow stores whole and reads back: a
-- message's payload (read for each delivery), an attempt's response, an inbound event's body.
-- Only values written from now on are compressed with lz4; PostgreSQL reads either.
--
-- Each change is to the catalog only (no table is rewritten), but takes its table's exclusive
-- lock until the migration commits: it waits for the transactions using the table, and the
-- ones after it wait for that moment.
--
-- lz4 needs PostgreSQL 14 and a server built with it (Debian's and the official images are). On
-- one without, the columns keep pglz and this migration changes nothing. The first block is
-- vow_idempotency::postgres::SCHEMA's; a test checks the migrations hold all of it.
DO $$
BEGIN
    IF current_setting('server_version_num')::int >= 140000 THEN
        EXECUTE 'ALTER TABLE idempotency_records
            ALTER COLUMN canonical_body SET COMPRESSION lz4,
            ALTER COLUMN response_body SET COMPRESSION lz4';
    END IF;
EXCEPTION WHEN feature_not_supported THEN
    RAISE NOTICE 'no lz4 on this server: idempotency records stay compressed with pglz';
END $$;
DO $$
BEGIN
    IF current_setting('server_version_num')::int >= 140000 THEN
        EXECUTE 'ALTER TABLE messages ALTER COLUMN payload SET COMPRESSION lz4';
        EXECUTE 'ALTER TABLE attempts ALTER COLUMN response SET COMPRESSION lz4';
        EXECUTE 'ALTER TABLE inbound_events ALTER COLUMN payload SET COMPRESSION lz4';
    END IF;
EXCEPTION WHEN feature_not_supported THEN
    RAISE NOTICE 'no lz4 on this server: wide values stay compressed with pglz';
END $$;
