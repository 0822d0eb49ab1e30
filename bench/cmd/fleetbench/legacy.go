package main

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" driver, for the legacy plan on PostgreSQL

	"github.com/uncaged/workflow/gateway/store"
)

// legacy runs the store's first full-text search plan, kept here (and only
// here) so that each run measures it beside the store's current plan on
// the same history: filter every match, count them up to the bound, then
// sort them all by updated_at for the page. It reads the store's schema
// directly and returns what SearchThreads would: the page's keys and the
// total.
type legacy struct {
	db       *sql.DB
	postgres bool
	maxTotal int
}

// openLegacy opens its own connection to the store's database.
func openLegacy(dataDir, databaseURL string) (*legacy, error) {
	if databaseURL != "" {
		db, err := sql.Open("pgx", databaseURL)
		return &legacy{db: db, postgres: true, maxTotal: store.DefaultMaxTotal}, err
	}
	db, err := sql.Open("sqlite", "file:"+dataDir+"/"+store.SQLiteFile+"?_pragma=busy_timeout(10000)")
	return &legacy{db: db, maxTotal: store.DefaultMaxTotal}, err
}

// legacyThreadCols are the columns a search returns.
const legacyThreadCols = "machine, id, workflow, status, prompt, started_at, updated_at, duration_ns, steps, return_code, summary, usage"

// legacyFTSQuery is the quoting the store's FTS5 queries use.
func legacyFTSQuery(q string) string {
	var parts []string
	for _, f := range strings.Fields(q) {
		if legacyHasWord(f) {
			parts = append(parts, `"`+strings.ReplaceAll(f, `"`, `""`)+`"`)
		}
	}
	return strings.Join(parts, " ")
}

func legacyHasWord(s string) bool {
	return strings.IndexFunc(s, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }) >= 0
}

// search is SearchThreads as the first plan ran it.
func (l *legacy) search(ctx context.Context, q store.ThreadQuery) ([]string, int, error) {
	var where []string
	var args []any
	add := func(cond string, v any) {
		args = append(args, v)
		where = append(where, strings.ReplaceAll(cond, "?", "$"+strconv.Itoa(len(args))))
	}
	tv := func(t time.Time) any {
		if l.postgres {
			return t.UTC().Truncate(time.Microsecond)
		}
		return t.UTC().UnixMicro()
	}
	if q.Machine != "" {
		add("machine = ?", q.Machine)
	}
	if q.Workflow != "" {
		add("workflow = ?", q.Workflow)
	}
	if q.Status != "" {
		add("status = ?", q.Status)
	}
	if !q.Since.IsZero() {
		add("updated_at >= ?", tv(q.Since))
	}
	if !q.Until.IsZero() {
		add("updated_at < ?", tv(q.Until))
	}
	if legacyHasWord(q.Q) {
		if l.postgres {
			add("search @@ plainto_tsquery('simple', ?)", q.Q)
		} else {
			add("seq IN (SELECT rowid FROM threads_fts WHERE threads_fts MATCH ?)", legacyFTSQuery(q.Q))
		}
	}
	cond := ""
	if len(where) > 0 {
		cond = " WHERE " + strings.Join(where, " AND ")
	}
	sq := func(s string) string {
		if l.postgres {
			return s
		}
		return strings.ReplaceAll(s, "$", "?")
	}
	limit := q.Limit
	if limit <= 0 {
		limit = store.DefaultLimit
	}
	n := len(args)
	var total int
	if err := l.db.QueryRowContext(ctx, sq(fmt.Sprintf(`SELECT count(*) FROM (SELECT 1 FROM threads%s LIMIT $%d) AS matches`, cond, n+1)),
		append(slices.Clone(args), l.maxTotal+1)...).Scan(&total); err != nil {
		return nil, 0, err
	}
	total = min(total, l.maxTotal)
	rows, err := l.db.QueryContext(ctx, sq(fmt.Sprintf(`SELECT %s FROM threads%s ORDER BY updated_at DESC, machine, id LIMIT $%d OFFSET $%d`,
		legacyThreadCols, cond, n+1, n+2)), append(args, limit, max(q.Offset, 0))...)
	if err != nil {
		return nil, 0, err
	}
	defer func() { _ = rows.Close() }() // Err is checked below
	var keys []string
	for rows.Next() {
		// Every column is read, as the store does: the sort carries them.
		var m, id string
		dest := []any{&m, &id}
		for range strings.Count(legacyThreadCols, ",") - 1 {
			dest = append(dest, new(any))
		}
		if err := rows.Scan(dest...); err != nil {
			return nil, 0, err
		}
		keys = append(keys, m+"/"+id)
	}
	return keys, total, rows.Err()
}
