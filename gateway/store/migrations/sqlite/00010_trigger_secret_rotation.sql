-- A webhook's secret can be replaced while the one before it keeps
-- being accepted for a while, so that a sender can be given the new one
-- without a delivery refused: previous_secret until previous_until
-- (microseconds since the epoch, as every time here; NULL and '' when
-- there is none).

-- +goose Up
ALTER TABLE triggers ADD COLUMN previous_secret TEXT NOT NULL DEFAULT '';
ALTER TABLE triggers ADD COLUMN previous_until INTEGER;

-- +goose Down
ALTER TABLE triggers DROP COLUMN previous_until;
ALTER TABLE triggers DROP COLUMN previous_secret;
