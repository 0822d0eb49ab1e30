-- Which database this is, and each machine's share of it (SQLite).
--
-- store_identity holds one row, an id drawn when the database is made
-- (or first migrated): a gateway notes it at start and keeps checking
-- that the file at its data directory is still the one it opened, and
-- the token commands check that the file they open is the one a running
-- gateway uses.
--
-- Each thread counts what it takes (bytes: its text and usage, and 256
-- for the rest of its row and its index entries, as the gateway computes
-- it), and each machine how many threads it has and their bytes, kept by
-- triggers so that checking a machine's share costs one row's read.

-- +goose Up
CREATE TABLE store_identity (
    one        INTEGER PRIMARY KEY CHECK (one = 1),
    id         TEXT NOT NULL,
    created_at INTEGER NOT NULL
);
INSERT INTO store_identity (one, id, created_at)
VALUES (1, lower(hex(randomblob(16))), CAST((julianday('now') - 2440587.5) * 86400000000 AS INTEGER));

ALTER TABLE threads ADD COLUMN bytes INTEGER NOT NULL DEFAULT 0;
UPDATE threads SET bytes = 256 + length(CAST(id AS BLOB)) + length(CAST(workflow AS BLOB)) + length(CAST(status AS BLOB))
    + length(CAST(prompt AS BLOB)) + length(CAST(summary AS BLOB)) + coalesce(length(CAST(usage AS BLOB)), 0);

ALTER TABLE machines ADD COLUMN thread_count INTEGER NOT NULL DEFAULT 0;
ALTER TABLE machines ADD COLUMN stored_bytes INTEGER NOT NULL DEFAULT 0;
UPDATE machines SET
    thread_count = (SELECT count(*) FROM threads WHERE threads.machine = machines.name),
    stored_bytes = (SELECT coalesce(sum(bytes), 0) FROM threads WHERE threads.machine = machines.name);

-- +goose StatementBegin
CREATE TRIGGER threads_share_insert AFTER INSERT ON threads BEGIN
    UPDATE machines SET thread_count = thread_count + 1, stored_bytes = stored_bytes + new.bytes WHERE name = new.machine;
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER threads_share_delete AFTER DELETE ON threads BEGIN
    UPDATE machines SET thread_count = thread_count - 1, stored_bytes = stored_bytes - old.bytes WHERE name = old.machine;
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER threads_share_update AFTER UPDATE OF bytes ON threads WHEN old.bytes IS NOT new.bytes BEGIN
    UPDATE machines SET stored_bytes = stored_bytes - old.bytes + new.bytes WHERE name = new.machine;
END;
-- +goose StatementEnd

-- +goose Down
DROP TRIGGER threads_share_update;
DROP TRIGGER threads_share_delete;
DROP TRIGGER threads_share_insert;
ALTER TABLE machines DROP COLUMN stored_bytes;
ALTER TABLE machines DROP COLUMN thread_count;
ALTER TABLE threads DROP COLUMN bytes;
DROP TABLE store_identity;
