-- Triggers (issue 30): a webhook or a cron schedule that starts a thread
-- of a named workflow on a named machine, and their runs, one per
-- firing. A run waits in state 'queued' until a sender claims it
-- ('sending', under a lease: lease_owner until lease_until) and the
-- connector answers with a thread ('started') or refuses it ('failed'),
-- or until expires_at passes with its machine away ('expired'). A
-- delivery (a webhook's delivery id, or "schedule:" and the scheduled
-- time) is recorded once per trigger: the unique index keeps a repeated
-- delivery, or a time two replicas both fire, to one run. expire_ns is
-- how long a run waits, in nanoseconds like threads.duration_ns; paused
-- is 0 or 1; times are microseconds since the epoch, as in every table
-- here.

-- +goose Up
CREATE TABLE triggers (
    id         TEXT PRIMARY KEY,
    kind       TEXT NOT NULL CHECK (kind IN ('webhook', 'schedule')),
    machine    TEXT NOT NULL,
    workflow   TEXT NOT NULL,
    prompt     TEXT NOT NULL DEFAULT '',
    note       TEXT NOT NULL DEFAULT '',
    secret     TEXT NOT NULL DEFAULT '',
    schedule   TEXT NOT NULL DEFAULT '',
    time_zone  TEXT NOT NULL DEFAULT '',
    missed     TEXT NOT NULL DEFAULT '' CHECK (missed IN ('', 'run-once', 'skip')),
    expire_ns  INTEGER NOT NULL,
    paused     INTEGER NOT NULL DEFAULT 0 CHECK (paused IN (0, 1)),
    created_at INTEGER NOT NULL,
    created_by TEXT NOT NULL DEFAULT '',
    last_fired INTEGER
);
CREATE INDEX triggers_created ON triggers (created_at, id);

CREATE TABLE trigger_runs (
    id            TEXT PRIMARY KEY,
    trigger_id    TEXT NOT NULL REFERENCES triggers (id) ON DELETE CASCADE,
    machine       TEXT NOT NULL,
    workflow      TEXT NOT NULL,
    prompt        TEXT NOT NULL DEFAULT '',
    delivery_id   TEXT NOT NULL DEFAULT '',
    scheduled_for INTEGER,
    state         TEXT NOT NULL CHECK (state IN ('queued', 'sending', 'started', 'expired', 'failed')),
    thread_id     TEXT NOT NULL DEFAULT '',
    error         TEXT NOT NULL DEFAULT '',
    attempts      INTEGER NOT NULL DEFAULT 0,
    created_at    INTEGER NOT NULL,
    expires_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL,
    lease_owner   TEXT NOT NULL DEFAULT '',
    lease_until   INTEGER
);
CREATE UNIQUE INDEX trigger_runs_delivery ON trigger_runs (trigger_id, delivery_id) WHERE delivery_id <> '';
-- Listing newest first, overall, per trigger and per machine.
CREATE INDEX trigger_runs_created ON trigger_runs (created_at, id);
CREATE INDEX trigger_runs_trigger ON trigger_runs (trigger_id, created_at, id);
CREATE INDEX trigger_runs_machine ON trigger_runs (machine, created_at, id);
-- The queue: claims take a machine's oldest, expiry looks at expires_at.
CREATE INDEX trigger_runs_waiting ON trigger_runs (machine, created_at, id) WHERE state IN ('queued', 'sending');
CREATE INDEX trigger_runs_expiring ON trigger_runs (expires_at) WHERE state IN ('queued', 'sending');
-- A trigger's finished runs beyond the newest MaxFinishedRuns are deleted
-- when it fires again.
CREATE INDEX trigger_runs_finished ON trigger_runs (trigger_id, created_at, id) WHERE state IN ('started', 'expired', 'failed');

-- +goose Down
DROP TABLE trigger_runs;
DROP TABLE triggers;
