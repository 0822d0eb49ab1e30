-- The gateway's first schema (PostgreSQL).

-- +goose Up
CREATE TABLE tokens (
    id         text PRIMARY KEY,
    kind       text NOT NULL CHECK (kind IN ('connector', 'dashboard')),
    name       text NOT NULL,
    created_at timestamptz NOT NULL,
    expires_at timestamptz,
    note       text NOT NULL DEFAULT '',
    revoked_at timestamptz
);
CREATE INDEX tokens_kind_name ON tokens (kind, name);
-- Loading the revoked set at start reads only revoked rows.
CREATE INDEX tokens_revoked ON tokens (revoked_at) WHERE revoked_at IS NOT NULL;

CREATE TABLE registrations (
    name           text PRIMARY KEY,
    url            text NOT NULL,
    token_sealed   bytea NOT NULL,
    registered_at  timestamptz NOT NULL,
    last_heartbeat timestamptz NOT NULL
);

CREATE TABLE machines (
    name       text PRIMARY KEY,
    first_seen timestamptz NOT NULL,
    last_seen  timestamptz NOT NULL
);

CREATE TABLE threads (
    machine     text NOT NULL REFERENCES machines (name) ON DELETE CASCADE,
    id          text NOT NULL,
    workflow    text NOT NULL DEFAULT '',
    status      text NOT NULL DEFAULT '',
    prompt      text NOT NULL DEFAULT '',
    started_at  timestamptz,
    updated_at  timestamptz NOT NULL,
    duration_ns bigint NOT NULL DEFAULT 0,
    steps       integer NOT NULL DEFAULT 0,
    return_code integer,
    summary     text NOT NULL DEFAULT '',
    usage       jsonb,
    -- The 'simple' configuration does no stemming and knows no stop
    -- words: prompts are in any language, and it matches SQLite's FTS5
    -- default (whole words, case-folded), so both backends answer alike.
    search      tsvector GENERATED ALWAYS AS (to_tsvector('simple', prompt || ' ' || summary)) STORED,
    PRIMARY KEY (machine, id)
);
-- Searches order by (updated_at DESC, machine, id): indexes that end in
-- that order serve a page without sorting every match.
CREATE INDEX threads_updated ON threads (updated_at DESC, machine, id);
CREATE INDEX threads_machine_updated ON threads (machine, updated_at DESC, id);
CREATE INDEX threads_workflow_updated ON threads (workflow, updated_at DESC, machine, id);
CREATE INDEX threads_status_updated ON threads (status, updated_at DESC, machine, id);
CREATE INDEX threads_search ON threads USING gin (search);

CREATE TABLE audit (
    id       bigserial PRIMARY KEY,
    at       timestamptz NOT NULL,
    token_id text NOT NULL DEFAULT '',
    actor    text NOT NULL DEFAULT '',
    source   text NOT NULL DEFAULT '',
    action   text NOT NULL,
    machine  text NOT NULL DEFAULT '',
    target   text NOT NULL DEFAULT '',
    status   integer NOT NULL DEFAULT 0
);
CREATE INDEX audit_at ON audit (at DESC);
CREATE INDEX audit_action_at ON audit (action, at DESC);
CREATE INDEX audit_machine_at ON audit (machine, at DESC);

-- +goose Down
DROP TABLE audit;
DROP TABLE threads;
DROP TABLE machines;
DROP TABLE registrations;
DROP TABLE tokens;
