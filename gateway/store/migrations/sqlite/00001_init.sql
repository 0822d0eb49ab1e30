-- The gateway's first schema (SQLite). Times are INTEGER microseconds
-- since the Unix epoch, UTC: SQLite has no time type, and integers order
-- and compare correctly.

-- +goose Up
CREATE TABLE tokens (
    id         TEXT PRIMARY KEY,
    kind       TEXT NOT NULL CHECK (kind IN ('connector', 'dashboard')),
    name       TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    expires_at INTEGER,
    note       TEXT NOT NULL DEFAULT '',
    revoked_at INTEGER
);
CREATE INDEX tokens_kind_name ON tokens (kind, name);
-- Loading the revoked set at start reads only revoked rows.
CREATE INDEX tokens_revoked ON tokens (revoked_at) WHERE revoked_at IS NOT NULL;

CREATE TABLE registrations (
    name           TEXT PRIMARY KEY,
    url            TEXT NOT NULL,
    token_sealed   BLOB NOT NULL,
    registered_at  INTEGER NOT NULL,
    last_heartbeat INTEGER NOT NULL
);

CREATE TABLE machines (
    name       TEXT PRIMARY KEY,
    first_seen INTEGER NOT NULL,
    last_seen  INTEGER NOT NULL
);

-- seq is an explicit INTEGER PRIMARY KEY because the FTS index refers to
-- rows by rowid, and VACUUM may renumber an implicit rowid.
CREATE TABLE threads (
    seq         INTEGER PRIMARY KEY,
    machine     TEXT NOT NULL REFERENCES machines (name) ON DELETE CASCADE,
    id          TEXT NOT NULL,
    workflow    TEXT NOT NULL DEFAULT '',
    status      TEXT NOT NULL DEFAULT '',
    prompt      TEXT NOT NULL DEFAULT '',
    started_at  INTEGER,
    updated_at  INTEGER NOT NULL,
    duration_ns INTEGER NOT NULL DEFAULT 0,
    steps       INTEGER NOT NULL DEFAULT 0,
    return_code INTEGER,
    summary     TEXT NOT NULL DEFAULT '',
    usage       TEXT,
    UNIQUE (machine, id)
);
-- Searches order by (updated_at DESC, machine, id): indexes that end in
-- that order serve a page without sorting every match.
CREATE INDEX threads_updated ON threads (updated_at DESC, machine, id);
CREATE INDEX threads_machine_updated ON threads (machine, updated_at DESC, id);
CREATE INDEX threads_workflow_updated ON threads (workflow, updated_at DESC, machine, id);
CREATE INDEX threads_status_updated ON threads (status, updated_at DESC, machine, id);

-- External-content FTS5 index over prompt and summary: the text is kept
-- once, in threads; triggers keep the index in step.
CREATE VIRTUAL TABLE threads_fts USING fts5 (prompt, summary, content = 'threads', content_rowid = 'seq');

-- +goose StatementBegin
CREATE TRIGGER threads_fts_insert AFTER INSERT ON threads BEGIN
    INSERT INTO threads_fts (rowid, prompt, summary) VALUES (new.seq, new.prompt, new.summary);
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER threads_fts_delete AFTER DELETE ON threads BEGIN
    INSERT INTO threads_fts (threads_fts, rowid, prompt, summary) VALUES ('delete', old.seq, old.prompt, old.summary);
END;
-- +goose StatementEnd

-- A resync rewrites rows whose text did not change; re-indexing them
-- would be most of its cost.
-- +goose StatementBegin
CREATE TRIGGER threads_fts_update AFTER UPDATE OF prompt, summary ON threads
WHEN old.prompt IS NOT new.prompt OR old.summary IS NOT new.summary BEGIN
    INSERT INTO threads_fts (threads_fts, rowid, prompt, summary) VALUES ('delete', old.seq, old.prompt, old.summary);
    INSERT INTO threads_fts (rowid, prompt, summary) VALUES (new.seq, new.prompt, new.summary);
END;
-- +goose StatementEnd

CREATE TABLE audit (
    id      INTEGER PRIMARY KEY,
    at      INTEGER NOT NULL,
    token_id TEXT NOT NULL DEFAULT '',
    actor   TEXT NOT NULL DEFAULT '',
    source  TEXT NOT NULL DEFAULT '',
    action  TEXT NOT NULL,
    machine TEXT NOT NULL DEFAULT '',
    target  TEXT NOT NULL DEFAULT '',
    status  INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX audit_at ON audit (at DESC);
CREATE INDEX audit_action_at ON audit (action, at DESC);
CREATE INDEX audit_machine_at ON audit (machine, at DESC);

-- +goose Down
DROP TABLE audit;
DROP TRIGGER threads_fts_update;
DROP TRIGGER threads_fts_delete;
DROP TRIGGER threads_fts_insert;
DROP TABLE threads_fts;
DROP TABLE threads;
DROP TABLE machines;
DROP TABLE registrations;
DROP TABLE tokens;
