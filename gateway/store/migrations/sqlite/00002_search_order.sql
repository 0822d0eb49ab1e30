-- Full-text search in the order of the results (SQLite).
--
-- A search returns threads newest first, (updated_at DESC, machine, id).
-- The first schema's FTS index knew rows by an arbitrary number, so a
-- search had to fetch and sort every match to find the first page: for a
-- common word, most of the table. Now a thread's seq (the index's rowid)
-- is its place in that order: updated_at in microseconds since
-- 2020-01-01, clamped to about ±71 years, shifted left 12 bits, plus a
-- tie-breaker (up to 4,096 threads updated in the same microsecond). FTS5
-- walks its matches by rowid, newest first, and stops once the page is
-- full; since and until become rowid bounds.
--
-- The machine, workflow and status filters are indexed too, in a third
-- column of hex tokens ('m' || hex(machine) ...), exact where the words
-- are case-folded, so that a filtered search is one FTS5 query whose AND
-- skips through the narrower list instead of fetching rows to test them.
-- The index is contentless: everything it must give back is its rowid.
-- Its tokenizer removes diacritics from every letter (remove_diacritics 2;
-- the default, 1, misses letters with several), as PostgreSQL's unaccent
-- does: "cafe" finds "Café".

-- +goose Up
CREATE TABLE threads_new (
    seq         INTEGER PRIMARY KEY,
    machine     TEXT NOT NULL REFERENCES machines (name) ON DELETE CASCADE,
    id          TEXT NOT NULL,
    workflow    TEXT NOT NULL DEFAULT '',
    status      TEXT NOT NULL DEFAULT '',
    prompt      TEXT NOT NULL DEFAULT '',
    started_at  INTEGER,
    updated_at  INTEGER NOT NULL,
    duration_ns INTEGER NOT NULL DEFAULT 0,
    steps       INTEGER NOT NULL DEFAULT 0,
    return_code INTEGER,
    summary     TEXT NOT NULL DEFAULT '',
    usage       TEXT,
    UNIQUE (machine, id)
);
INSERT INTO threads_new (seq, machine, id, workflow, status, prompt, started_at, updated_at, duration_ns, steps, return_code, summary, usage)
SELECT (slot << 12) + row_number() OVER (PARTITION BY slot ORDER BY machine, id) - 1,
       machine, id, workflow, status, prompt, started_at, updated_at, duration_ns, steps, return_code, summary, usage
FROM (SELECT *, max(min(updated_at - 1577836800000000, 2251799813685247), -2251799813685248) AS slot FROM threads);

DROP TRIGGER threads_fts_update;
DROP TRIGGER threads_fts_delete;
DROP TRIGGER threads_fts_insert;
DROP TABLE threads_fts;
DROP TABLE threads;
ALTER TABLE threads_new RENAME TO threads;
CREATE INDEX threads_updated ON threads (updated_at DESC, machine, id);
CREATE INDEX threads_machine_updated ON threads (machine, updated_at DESC, id);
CREATE INDEX threads_workflow_updated ON threads (workflow, updated_at DESC, machine, id);
CREATE INDEX threads_status_updated ON threads (status, updated_at DESC, machine, id);

CREATE VIRTUAL TABLE threads_fts USING fts5 (prompt, summary, facets, content = '',
    tokenize = 'unicode61 remove_diacritics 2');
INSERT INTO threads_fts (rowid, prompt, summary, facets)
SELECT seq, prompt, summary, 'm' || hex(machine) || ' w' || hex(workflow) || ' s' || hex(status) FROM threads;

-- SyncThreads writes the index itself, in ascending rowid order (FTS5
-- writes a segment whenever a rowid is not above the previous write's,
-- which a trigger's delete-then-insert per thread would do for every
-- thread moving in time). A contentless index forgets an entry when told
-- what it held ('delete' with the old values), which costs what an insert
-- does. The trigger keeps Prune's deletions, in time order, out of the
-- index.
-- +goose StatementBegin
CREATE TRIGGER threads_fts_delete AFTER DELETE ON threads BEGIN
    INSERT INTO threads_fts (threads_fts, rowid, prompt, summary, facets)
    VALUES ('delete', old.seq, old.prompt, old.summary, 'm' || hex(old.machine) || ' w' || hex(old.workflow) || ' s' || hex(old.status));
END;
-- +goose StatementEnd

-- +goose Down
DROP TRIGGER threads_fts_delete;
DROP TABLE threads_fts;
CREATE VIRTUAL TABLE threads_fts USING fts5 (prompt, summary, content = 'threads', content_rowid = 'seq');
INSERT INTO threads_fts (threads_fts) VALUES ('rebuild');

-- +goose StatementBegin
CREATE TRIGGER threads_fts_insert AFTER INSERT ON threads BEGIN
    INSERT INTO threads_fts (rowid, prompt, summary) VALUES (new.seq, new.prompt, new.summary);
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER threads_fts_delete AFTER DELETE ON threads BEGIN
    INSERT INTO threads_fts (threads_fts, rowid, prompt, summary) VALUES ('delete', old.seq, old.prompt, old.summary);
END;
-- +goose StatementEnd

-- +goose StatementBegin
CREATE TRIGGER threads_fts_update AFTER UPDATE OF prompt, summary ON threads
WHEN old.prompt IS NOT new.prompt OR old.summary IS NOT new.summary BEGIN
    INSERT INTO threads_fts (threads_fts, rowid, prompt, summary) VALUES ('delete', old.seq, old.prompt, old.summary);
    INSERT INTO threads_fts (rowid, prompt, summary) VALUES (new.seq, new.prompt, new.summary);
END;
-- +goose StatementEnd
