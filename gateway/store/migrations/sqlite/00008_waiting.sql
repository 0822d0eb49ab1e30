-- What a thread waiting for a person asks (issue 29): the role a person
-- plays, the question (cut to fleet.QuestionMaxRunes runes), who is asked
-- ('' for anyone), since when and until when, as the connector's change
-- stream reports them. A thread holds them while its status is waiting;
-- any other status clears them (wait_since is then NULL). The inbox lists
-- the waiting threads, oldest wait first: the partial index holds only
-- those, a handful among the fleet's history. Times are microseconds since
-- the epoch, as in every table here.

-- +goose Up
ALTER TABLE threads ADD COLUMN wait_role TEXT NOT NULL DEFAULT '';
ALTER TABLE threads ADD COLUMN wait_question TEXT NOT NULL DEFAULT '';
ALTER TABLE threads ADD COLUMN wait_assignee TEXT NOT NULL DEFAULT '';
ALTER TABLE threads ADD COLUMN wait_since INTEGER;
ALTER TABLE threads ADD COLUMN wait_deadline INTEGER;
CREATE INDEX threads_waiting ON threads (wait_since, machine, id) WHERE status = 'waiting';

-- +goose Down
DROP INDEX threads_waiting;
ALTER TABLE threads DROP COLUMN wait_deadline;
ALTER TABLE threads DROP COLUMN wait_since;
ALTER TABLE threads DROP COLUMN wait_assignee;
ALTER TABLE threads DROP COLUMN wait_question;
ALTER TABLE threads DROP COLUMN wait_role;
