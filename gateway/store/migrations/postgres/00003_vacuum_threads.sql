-- After 00002 rewrote the threads table, its visibility map is empty and
-- its statistics lack the new column: every index-only scan (the count of
-- a filtered search) visits the heap again, and autovacuum, which waits
-- for changed rows, may not come for days. VACUUM cannot run inside a
-- transaction, hence a migration of its own. On a new database it takes
-- no time.

-- +goose NO TRANSACTION
-- +goose Up
VACUUM (ANALYZE) threads;

-- +goose Down
SELECT 1;
