-- Which database this is, who uses it, and each machine's share of it
-- (PostgreSQL).
--
-- store_identity holds one row, an id drawn when the database is made
-- (or first migrated): a gateway notes it at start and keeps checking
-- that the database its URL reaches is still the one it opened.
-- gateway_heartbeats has a row per running gateway, refreshed every few
-- seconds, so that a token command can tell whether any gateway uses the
-- database it was pointed at.
--
-- Each thread counts what it takes (bytes: its text and usage, and 256
-- for the rest of its row and its index entries, as the gateway computes
-- it), and each machine how many threads it has and their bytes, kept by
-- a trigger so that checking a machine's share costs one row's read.

-- +goose Up
CREATE TABLE store_identity (
    one        integer PRIMARY KEY CHECK (one = 1),
    id         text NOT NULL,
    created_at timestamptz NOT NULL
);
INSERT INTO store_identity (one, id, created_at) VALUES (1, md5(random()::text || clock_timestamp()::text), now());

CREATE TABLE gateway_heartbeats (
    holder     text PRIMARY KEY,
    host       text NOT NULL DEFAULT '',
    pid        integer NOT NULL DEFAULT 0,
    started_at timestamptz NOT NULL,
    seen_at    timestamptz NOT NULL
);

ALTER TABLE threads ADD COLUMN bytes bigint NOT NULL DEFAULT 0;
UPDATE threads SET bytes = 256 + octet_length(id) + octet_length(workflow) + octet_length(status)
    + octet_length(prompt) + octet_length(summary) + coalesce(octet_length(usage::text), 0);

ALTER TABLE machines ADD COLUMN thread_count bigint NOT NULL DEFAULT 0;
ALTER TABLE machines ADD COLUMN stored_bytes bigint NOT NULL DEFAULT 0;
UPDATE machines SET
    thread_count = (SELECT count(*) FROM threads WHERE threads.machine = machines.name),
    stored_bytes = (SELECT coalesce(sum(bytes), 0) FROM threads WHERE threads.machine = machines.name);

-- +goose StatementBegin
CREATE FUNCTION threads_share() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        UPDATE machines SET thread_count = thread_count + 1, stored_bytes = stored_bytes + NEW.bytes WHERE name = NEW.machine;
    ELSIF TG_OP = 'DELETE' THEN
        UPDATE machines SET thread_count = thread_count - 1, stored_bytes = stored_bytes - OLD.bytes WHERE name = OLD.machine;
    ELSIF NEW.bytes IS DISTINCT FROM OLD.bytes THEN
        UPDATE machines SET stored_bytes = stored_bytes - OLD.bytes + NEW.bytes WHERE name = NEW.machine;
    END IF;
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER threads_share AFTER INSERT OR DELETE OR UPDATE OF bytes ON threads
    FOR EACH ROW EXECUTE FUNCTION threads_share();

-- +goose Down
DROP TRIGGER threads_share ON threads;
DROP FUNCTION threads_share();
ALTER TABLE machines DROP COLUMN stored_bytes;
ALTER TABLE machines DROP COLUMN thread_count;
ALTER TABLE threads DROP COLUMN bytes;
DROP TABLE gateway_heartbeats;
DROP TABLE store_identity;
