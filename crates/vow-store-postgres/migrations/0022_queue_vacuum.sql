-- The delivery queue must not decay as it is used (issue 18). Every delivery row is updated at
-- least twice (claimed, then recorded), and each update leaves a dead tuple, in the table and in
-- the partial index the claim scans (`status = 'pending'`). With the defaults, autovacuum waits
-- for 20 % of the table to be dead (tens of thousands of rows under load) and then sleeps between
-- pages, so the claim walks ever more dead entries. Here it runs once 1 % (plus 1,000 rows) is
-- dead, without sleeping, and analyze keeps the planner's row counts current.
--
-- fillfactor 80 leaves room in each page, so a claim (which sets only the lease columns, in no
-- index) is a HOT update: no new index entries, and the old version is pruned on the page.
ALTER TABLE deliveries SET (
    fillfactor = 80,
    autovacuum_vacuum_scale_factor = 0.01,
    autovacuum_vacuum_threshold = 1000,
    autovacuum_vacuum_insert_scale_factor = 0.01,
    autovacuum_analyze_scale_factor = 0.02,
    autovacuum_vacuum_cost_delay = 0
);
