-- Full-text search folds accents (PostgreSQL), as SQLite's FTS5 does: a
-- search for "cafe" finds "Café", and "café" finds "cafe".
--
-- The 'simple' configuration keeps accents. fleet_words is a copy of
-- it that first runs words through the unaccent extension's dictionary.
-- unaccent ships with PostgreSQL (contrib) and is a trusted extension,
-- which the database's owner may create; where it is missing or may not
-- be created, fleet_words stays a plain copy of 'simple', searches
-- match accents exactly, and a later migration can add it.

-- +goose Up
-- +goose StatementBegin
DO $$
BEGIN
    BEGIN
        CREATE EXTENSION IF NOT EXISTS unaccent;
    EXCEPTION WHEN OTHERS THEN
        RAISE WARNING 'the unaccent extension could not be created (%): full-text search will not fold accents', SQLERRM;
    END;
    CREATE TEXT SEARCH CONFIGURATION fleet_words (COPY = simple);
    IF EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'unaccent') THEN
        ALTER TEXT SEARCH CONFIGURATION fleet_words
            ALTER MAPPING FOR word, hword, hword_part, numword, numhword, hword_numpart WITH unaccent, simple;
    END IF;
END
$$;
-- +goose StatementEnd

-- A generated column cannot change its expression: it is dropped (with
-- its index) and added again, which rewrites the table once.
ALTER TABLE threads DROP COLUMN search;
ALTER TABLE threads ADD COLUMN search tsvector
    GENERATED ALWAYS AS (to_tsvector('fleet_words', prompt || ' ' || summary)) STORED;
CREATE INDEX threads_search ON threads USING gin (search);
-- 00003 vacuums and analyzes the rewritten table: the planner picks
-- between walking the threads newest first and the GIN index by how common
-- each word is, and needs the new column's statistics.

-- +goose Down
ALTER TABLE threads DROP COLUMN search;
ALTER TABLE threads ADD COLUMN search tsvector
    GENERATED ALWAYS AS (to_tsvector('simple', prompt || ' ' || summary)) STORED;
CREATE INDEX threads_search ON threads USING gin (search);
DROP TEXT SEARCH CONFIGURATION fleet_words;
