-- Webhook notifications of threads that start waiting, fail or complete:
-- one row per receiver and event, added in the transaction that stores
-- the thread's new status, so a crash cannot lose one or add it twice.
-- The unique index is the event's identity (receiver, machine, thread,
-- status, the thread's time that made it): a change stream resent after
-- a reconnect, or a batch replayed from the spill file, finds its row
-- there and adds nothing. Receivers are named by a key drawn from their
-- URL, never by the URL: incoming-webhook URLs are secrets. Times are
-- microseconds since the epoch, as in every table here.

-- +goose Up
CREATE TABLE notifications (
    id                INTEGER PRIMARY KEY AUTOINCREMENT,
    target            TEXT NOT NULL,
    target_label      TEXT NOT NULL DEFAULT '',
    machine           TEXT NOT NULL,
    thread_id         TEXT NOT NULL,
    workflow          TEXT NOT NULL DEFAULT '',
    status            TEXT NOT NULL,
    summary           TEXT NOT NULL DEFAULT '',
    question          TEXT NOT NULL DEFAULT '',
    thread_updated_at INTEGER NOT NULL,
    created_at        INTEGER NOT NULL,
    state             TEXT NOT NULL,
    attempts          INTEGER NOT NULL DEFAULT 0,
    last_error        TEXT NOT NULL DEFAULT '',
    last_code         INTEGER NOT NULL DEFAULT 0,
    next_at           INTEGER NOT NULL,
    lease_owner       TEXT NOT NULL DEFAULT '',
    lease_until       INTEGER,
    finished_at       INTEGER
);
CREATE UNIQUE INDEX notifications_once ON notifications (target, machine, thread_id, status, thread_updated_at);
CREATE INDEX notifications_due ON notifications (next_at) WHERE state = 'pending';
CREATE INDEX notifications_created ON notifications (created_at DESC, id DESC);

-- +goose Down
DROP TABLE notifications;
