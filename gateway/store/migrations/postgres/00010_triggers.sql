-- Triggers (issue 30): a webhook or a cron schedule that starts a thread
-- of a named workflow on a named machine, and their runs, one per
-- firing. A run waits in state 'queued' until a sender claims it
-- ('sending', under a lease: lease_owner until lease_until, taken with
-- FOR UPDATE SKIP LOCKED so that one replica sends each) and the
-- connector answers with a thread ('started') or refuses it ('failed'),
-- or until expires_at passes with its machine away ('expired'). A
-- delivery (a webhook's delivery id, or "schedule:" and the scheduled
-- time) is recorded once per trigger: the unique index keeps a repeated
-- delivery, or a time two replicas both fire, to one run. expire_ns is
-- how long a run waits, in nanoseconds like threads.duration_ns.

-- +goose Up
CREATE TABLE triggers (
    id         text PRIMARY KEY,
    kind       text NOT NULL CHECK (kind IN ('webhook', 'schedule')),
    machine    text NOT NULL,
    workflow   text NOT NULL,
    prompt     text NOT NULL DEFAULT '',
    note       text NOT NULL DEFAULT '',
    secret     text NOT NULL DEFAULT '',
    schedule   text NOT NULL DEFAULT '',
    time_zone  text NOT NULL DEFAULT '',
    missed     text NOT NULL DEFAULT '' CHECK (missed IN ('', 'run-once', 'skip')),
    expire_ns  bigint NOT NULL,
    paused     boolean NOT NULL DEFAULT false,
    created_at timestamptz NOT NULL,
    created_by text NOT NULL DEFAULT '',
    last_fired timestamptz
);
CREATE INDEX triggers_created ON triggers (created_at, id);

CREATE TABLE trigger_runs (
    id            text PRIMARY KEY,
    trigger_id    text NOT NULL REFERENCES triggers (id) ON DELETE CASCADE,
    machine       text NOT NULL,
    workflow      text NOT NULL,
    prompt        text NOT NULL DEFAULT '',
    delivery_id   text NOT NULL DEFAULT '',
    scheduled_for timestamptz,
    state         text NOT NULL CHECK (state IN ('queued', 'sending', 'started', 'expired', 'failed')),
    thread_id     text NOT NULL DEFAULT '',
    error         text NOT NULL DEFAULT '',
    attempts      integer NOT NULL DEFAULT 0,
    created_at    timestamptz NOT NULL,
    expires_at    timestamptz NOT NULL,
    updated_at    timestamptz NOT NULL,
    lease_owner   text NOT NULL DEFAULT '',
    lease_until   timestamptz
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
