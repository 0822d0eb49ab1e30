-- Which connector names a connector token has held. Once a token has
-- held a name, the shared secret may neither connect, register nor
-- unregister it, after any restart and on every replica, until the
-- name's tokens are all revoked: the trigger below releases the name in
-- the same transaction as the revocation of its last unrevoked token.
-- The trigger's statements run after the revoking UPDATE's rows are all
-- changed, so a revocation of several tokens at once sees them all.

-- +goose Up
CREATE TABLE name_bindings (
    name     text PRIMARY KEY,
    token_id text NOT NULL DEFAULT '',
    bound_at timestamptz NOT NULL
);

-- +goose StatementBegin
CREATE FUNCTION release_name_bindings() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM name_bindings WHERE name = NEW.name AND NOT EXISTS (
        SELECT 1 FROM tokens WHERE kind = 'connector' AND name = NEW.name AND revoked_at IS NULL);
    RETURN NULL;
END
$$;
-- +goose StatementEnd

CREATE TRIGGER tokens_release_names AFTER UPDATE OF revoked_at ON tokens
FOR EACH ROW WHEN (NEW.kind = 'connector' AND NEW.revoked_at IS NOT NULL AND OLD.revoked_at IS NULL)
EXECUTE FUNCTION release_name_bindings();

-- +goose Down
DROP TRIGGER tokens_release_names ON tokens;
DROP FUNCTION release_name_bindings();
DROP TABLE name_bindings;
