-- Which connector names a connector token has held. Once a token has
-- held a name, the shared secret may neither connect, register nor
-- unregister it, after any restart and on every replica, until the
-- name's tokens are all revoked: the trigger below releases the name in
-- the same transaction as the revocation of its last unrevoked token.

-- +goose Up
CREATE TABLE name_bindings (
    name     TEXT PRIMARY KEY,
    token_id TEXT NOT NULL DEFAULT '',
    bound_at INTEGER NOT NULL
);

-- +goose StatementBegin
CREATE TRIGGER tokens_release_names AFTER UPDATE OF revoked_at ON tokens
WHEN new.kind = 'connector' AND new.revoked_at IS NOT NULL AND old.revoked_at IS NULL BEGIN
    DELETE FROM name_bindings WHERE name = new.name AND NOT EXISTS (
        SELECT 1 FROM tokens WHERE kind = 'connector' AND name = new.name AND revoked_at IS NULL);
END;
-- +goose StatementEnd

-- +goose Down
DROP TRIGGER tokens_release_names;
DROP TABLE name_bindings;
