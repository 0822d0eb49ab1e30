-- Each thread's LLM tokens and their cost in US dollars, as its
-- connector reports them, so the fleet's glance can sum them per machine
-- and per workflow without parsing every thread's usage document. Threads
-- synced before hold 0 until their connector syncs them again. A column
-- with a constant default is added without rewriting the table.

-- +goose Up
ALTER TABLE threads ADD COLUMN tokens bigint NOT NULL DEFAULT 0;
ALTER TABLE threads ADD COLUMN cost double precision NOT NULL DEFAULT 0;

-- +goose Down
ALTER TABLE threads DROP COLUMN cost;
ALTER TABLE threads DROP COLUMN tokens;
