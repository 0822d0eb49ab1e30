-- Webhook notifications of threads that start waiting, fail or complete:
-- one row per receiver and event, added in the transaction that stores
-- the thread's new status, so a crash cannot lose one or add it twice.
-- The unique index is the event's identity (receiver, machine, thread,
-- status, the thread's time that made it): a change stream resent after
-- a reconnect, or a batch replayed from the spill file, finds its row
-- there and adds nothing. A replica sends a row while it holds its lease
-- (lease_owner, lease_until), taken with FOR UPDATE SKIP LOCKED, so one
-- replica sends each. Receivers are named by a key drawn from their URL,
-- never by the URL: incoming-webhook URLs are secrets.

-- +goose Up
CREATE TABLE notifications (
    id                bigserial PRIMARY KEY,
    target            text NOT NULL,
    target_label      text NOT NULL DEFAULT '',
    machine           text NOT NULL,
    thread_id         text NOT NULL,
    workflow          text NOT NULL DEFAULT '',
    status            text NOT NULL,
    summary           text NOT NULL DEFAULT '',
    question          text NOT NULL DEFAULT '',
    thread_updated_at timestamptz NOT NULL,
    created_at        timestamptz NOT NULL,
    state             text NOT NULL,
    attempts          integer NOT NULL DEFAULT 0,
    last_error        text NOT NULL DEFAULT '',
    last_code         integer NOT NULL DEFAULT 0,
    next_at           timestamptz NOT NULL,
    lease_owner       text NOT NULL DEFAULT '',
    lease_until       timestamptz,
    finished_at       timestamptz
);
CREATE UNIQUE INDEX notifications_once ON notifications (target, machine, thread_id, status, thread_updated_at);
CREATE INDEX notifications_due ON notifications (next_at) WHERE state = 'pending';
CREATE INDEX notifications_created ON notifications (created_at DESC, id DESC);

-- +goose Down
DROP TABLE notifications;
