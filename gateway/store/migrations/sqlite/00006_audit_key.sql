-- Each audit entry the gateway writes carries a key it drew, so that an
-- entry written again — its first write's answer lost, or replayed from
-- the gateway's spill file after a database outage — is not added twice.
-- Entries written before (and the token commands') have none: NULLs are
-- distinct under a unique index.

-- +goose Up
ALTER TABLE audit ADD COLUMN entry_key TEXT;
CREATE UNIQUE INDEX audit_entry_key ON audit (entry_key);

-- +goose Down
DROP INDEX audit_entry_key;
ALTER TABLE audit DROP COLUMN entry_key;
