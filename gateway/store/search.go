package store

import (
	"context"
	"database/sql"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// SQLite's search order. A thread's seq, the rowid of its row and of its
// entry in the FTS index, is its place in the order searches return:
// (updated_at's slot << seqTieBits) + a tie-breaker, where the slot is
// updated_at in microseconds since seqEpoch, clamped to what fits. FTS5
// walks its matches in rowid order, so a full-text search reads them
// newest first and stops once the page is full, instead of fetching and
// sorting every match; since and until become rowid bounds.
const (
	// seqEpoch (2020-01-01 UTC, in Unix microseconds) centres the range
	// of slots on the present.
	seqEpoch = 1577836800000000
	// seqTieBits leaves room for 4,096 threads updated in the same
	// microsecond, more than a sync gives one time (the gateway's batches
	// are 500 threads).
	seqTieBits = 12
	// seqTies is how many threads one slot holds.
	seqTies = 1 << seqTieBits
	// seqMaxSlot and seqMinSlot bound the slots (about ±71 years around
	// seqEpoch): a later or earlier time shares the end slot, which keeps
	// the order and only loses the exactness of since and until beyond
	// them.
	seqMaxSlot = 1<<(63-seqTieBits) - 1
	seqMinSlot = -(1 << (63 - seqTieBits))
)

// seqSlot is the first seq of the slot t falls in.
func seqSlot(t time.Time) int64 {
	d := utc(t).UnixMicro() - seqEpoch
	return min(max(d, seqMinSlot), seqMaxSlot) << seqTieBits
}

// slotOf is the first seq of the slot holding seq.
func slotOf(seq int64) int64 { return seq >> seqTieBits << seqTieBits }

// hasWord reports whether s holds a letter or digit, i.e. something a
// full-text index can match.
func hasWord(s string) bool {
	return strings.IndexFunc(s, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }) >= 0
}

// ftsQuery turns free text into an FTS5 query that means "every word, in
// the prompt or the summary": each word is quoted, so FTS5's operators and
// punctuation in what a person typed are never syntax.
func ftsQuery(q string) string {
	var parts []string
	for _, f := range strings.Fields(q) {
		if hasWord(f) {
			parts = append(parts, `{prompt summary} : "`+strings.ReplaceAll(f, `"`, `""`)+`"`)
		}
	}
	return strings.Join(parts, " AND ")
}

// facetToken is the token the FTS index holds for a filter's value in its
// facets column: a letter naming the filter, then the value's bytes in
// hex, which the tokenizer keeps as one token and which no two values
// share. The migration writes them with SQLite's hex(), in upper case;
// the tokenizer folds case on both sides.
func facetToken(kind byte, v string) string {
	return string(kind) + strings.ToUpper(hex.EncodeToString([]byte(v)))
}

// ftsFilterQuery is ftsQuery narrowed by the filters the index holds.
func ftsFilterQuery(q ThreadQuery) string {
	var parts []string
	if text := ftsQuery(q.Q); text != "" {
		parts = append(parts, text)
	}
	for _, f := range []struct {
		kind byte
		v    string
	}{{'m', q.Machine}, {'w', q.Workflow}, {'s', q.Status}} {
		if f.v != "" {
			parts = append(parts, `facets : "`+facetToken(f.kind, f.v)+`"`)
		}
	}
	return strings.Join(parts, " AND ")
}

// facets counts the filters of q that the FTS index holds.
func facets(q ThreadQuery) int {
	n := 0
	for _, v := range []string{q.Machine, q.Workflow, q.Status} {
		if v != "" {
			n++
		}
	}
	return n
}

// SearchThreads implements Store.
func (s *sqlStore) SearchThreads(ctx context.Context, q ThreadQuery) (ThreadPage, error) {
	limit, offset := pageBounds(q.Limit, q.Offset)
	if q.After != nil {
		offset = 0
	}
	var page ThreadPage
	err := s.read(ctx, func(tx *sql.Tx) error {
		if s.backend == BackendPostgres {
			// pgx prepares and caches statements, and after five runs
			// PostgreSQL may plan one once for any parameters: blind to
			// which word, machine or bound is searched for, it may sort a
			// common word's every match, or walk the whole table for an
			// absent one. A search is worth planning for its values.
			if _, err := tx.ExecContext(ctx, `SET LOCAL plan_cache_mode = force_custom_plan`); err != nil {
				return err
			}
		}
		// Text without a word would be an empty query, which the two
		// backends treat differently; it filters nothing. Two filters or
		// more go to SQLite's FTS index too: a table index serves one of
		// them in order, and the others would be tested row by row.
		var err error
		if s.backend == BackendSQLite && (hasWord(q.Q) || facets(q) >= 2) {
			page, err = s.searchFTS(ctx, tx, q, limit, offset)
		} else {
			page, err = s.searchTable(ctx, tx, q, limit, offset)
		}
		return err
	})
	if err != nil {
		return ThreadPage{}, fmt.Errorf("store: search threads: %w", err)
	}
	return page, nil
}

// endPage cuts a page read one thread long (limit+1) to limit, and says
// where the next one starts if that thread was there.
func endPage(page *ThreadPage, threads []Thread, limit int) {
	if len(threads) > limit {
		threads = threads[:limit]
		next := CursorOf(threads[limit-1])
		page.Next = &next
	}
	page.Threads = threads
}

// searchTable answers a search from the threads table and its indexes:
// every search on PostgreSQL, and on SQLite those without words and with
// at most one of the machine, workflow and status filters.
func (s *sqlStore) searchTable(ctx context.Context, tx *sql.Tx, q ThreadQuery, limit, offset int) (ThreadPage, error) {
	var w conditions
	if q.Machine != "" {
		w.add("machine = ?", q.Machine)
	}
	if q.Workflow != "" {
		w.add("workflow = ?", q.Workflow)
	}
	if q.Status != "" {
		w.add("status = ?", q.Status)
	}
	if !q.Since.IsZero() {
		w.add("updated_at >= ?", s.tv(q.Since))
	}
	if !q.Until.IsZero() {
		w.add("updated_at < ?", s.tv(q.Until))
	}
	if hasWord(q.Q) {
		w.add("search @@ plainto_tsquery('fleet_words', ?)", q.Q)
	}
	var page ThreadPage
	cond := w.clause()
	n := len(w.args)
	w.args = slices.Clip(w.args) // the cursor's arguments are appended to a copy
	// Counting stops one past maxTotal: enough to know the bound was
	// passed, without visiting every match.
	if err := tx.QueryRowContext(ctx, s.q(fmt.Sprintf(`SELECT count(*) FROM (SELECT 1 FROM threads%s LIMIT $%d) AS matches`, cond, n+1)),
		append(slices.Clone(w.args), s.maxTotal+1)...).Scan(&page.Total); err != nil {
		return page, err
	}
	page.Total, page.TotalCapped = s.capTotal(page.Total)
	if q.After == nil && !page.TotalCapped && offset >= page.Total {
		return page, nil
	}
	if hasWord(q.Q) && !page.TotalCapped {
		// Few matches, all counted: collect them through the GIN index
		// (and the filters' indexes) and sort them. Left to itself, the
		// planner may walk the threads newest first and test each, which
		// is right for a common word but reads the whole table for one it
		// wrongly thinks common, or one that occurs nowhere (its
		// statistics know only the frequent words). A common word (a
		// count past the bound) is left to the planner, whose estimate
		// for it is good and whose walk stops once the page is full.
		for _, set := range []string{`SET LOCAL enable_seqscan = off`, `SET LOCAL enable_indexscan = off`} {
			if _, err := tx.ExecContext(ctx, set); err != nil {
				return page, err
			}
		}
	}
	from := "threads" + cond
	if c := q.After; c != nil {
		// The order is updated_at descending, then machine and id
		// ascending, which no row comparison expresses; the first
		// condition alone bounds the index's range, the second drops
		// the cursor's own time's threads up to it.
		var after conditions
		after.args = w.args
		after.add("updated_at <= ?", s.tv(c.UpdatedAt))
		at := len(after.args)
		after.args = append(after.args, c.Machine, c.ID)
		after.addFixed(fmt.Sprintf("(updated_at < $%d OR machine > $%d OR (machine = $%d AND id > $%d))", at, at+1, at+1, at+2))
		if hasWord(q.Q) && !page.TotalCapped {
			// The few matches are collected as above, then the cursor
			// drops those before it: OFFSET 0 keeps PostgreSQL from
			// folding the cursor into the collection, where it would
			// intersect the matches with most of the updated_at index.
			from = fmt.Sprintf("(SELECT %s FROM threads%s OFFSET 0) AS matches%s", threadCols, cond, after.clause())
		} else {
			w.conds = append(w.conds, after.conds...)
			from = "threads" + w.clause()
		}
		w.args = after.args
		n = len(w.args)
	}
	rows, err := tx.QueryContext(ctx, s.q(fmt.Sprintf(`SELECT %s FROM %s ORDER BY updated_at DESC, machine, id LIMIT $%d OFFSET $%d`,
		threadCols, from, n+1, n+2)), append(w.args, limit+1, offset)...)
	if err != nil {
		return page, err
	}
	threads, err := scanThreads(rows)
	endPage(&page, threads, limit)
	return page, err
}

// capTotal applies Config.MaxTotal to a count made up to one past it.
func (s *sqlStore) capTotal(n int) (int, bool) {
	if n > s.maxTotal {
		return s.maxTotal, true
	}
	return n, false
}

// scanThreads reads and closes rows of threadCols.
func scanThreads(rows *sql.Rows) ([]Thread, error) { return scanAll(rows, scanThread) }

// searchFTS answers a SQLite search from the FTS index alone:
// the words, the filters (as facet tokens) and the time bounds (as rowid
// bounds) are one FTS5 query, whose matches come in the search's order.
// Counting reads at most MaxTotal+1 of them; the page reads offset+limit
// rowids (limit after a cursor: its place is a rowid bound too) and
// fetches only the page's rows. The cost follows the page and the bound,
// not how many threads match.
func (s *sqlStore) searchFTS(ctx context.Context, tx *sql.Tx, q ThreadQuery, limit, offset int) (ThreadPage, error) {
	conds := []string{"threads_fts MATCH ?1"}
	args := []any{ftsFilterQuery(q)}
	if !q.Since.IsZero() {
		args = append(args, seqSlot(q.Since))
		conds = append(conds, "rowid >= ?"+strconv.Itoa(len(args)))
	}
	if !q.Until.IsZero() {
		args = append(args, seqSlot(q.Until))
		conds = append(conds, "rowid < ?"+strconv.Itoa(len(args)))
	}
	match := "SELECT rowid FROM threads_fts WHERE " + strings.Join(conds, " AND ")
	n := len(args)
	var page ThreadPage
	if err := tx.QueryRowContext(ctx, fmt.Sprintf(`SELECT count(*) FROM (%s LIMIT ?%d)`, match, n+1),
		append(slices.Clone(args), s.maxTotal+1)...).Scan(&page.Total); err != nil {
		return page, err
	}
	page.Total, page.TotalCapped = s.capTotal(page.Total)
	if q.After == nil && !page.TotalCapped && offset >= page.Total {
		return page, nil
	}
	seqs := func(query string, extra ...any) ([]int64, error) {
		rows, err := tx.QueryContext(ctx, query, append(slices.Clone(args), extra...)...)
		if err != nil {
			return nil, err
		}
		defer closeQuietly(rows)
		var out []int64
		for rows.Next() {
			var seq int64
			if err := rows.Scan(&seq); err != nil {
				return nil, err
			}
			out = append(out, seq)
		}
		return out, rows.Err()
	}
	// Threads updated in the same microsecond share a slot, in the order
	// they were stored, not by machine and id. Those of a slot the page
	// cuts through are read whole, so that sorting them puts the right
	// ones in the page.
	var head, window []int64
	var err error
	if c := q.After; c != nil {
		// The cursor's slot, whose threads after it start the page; the
		// window is below that slot.
		slot := slotOf(seqSlot(c.UpdatedAt))
		if head, err = seqs(fmt.Sprintf(`%s AND rowid >= ?%d AND rowid <= ?%d ORDER BY rowid DESC`, match, n+1, n+2), slot, slot+seqTies-1); err != nil {
			return page, err
		}
		window, err = seqs(fmt.Sprintf(`%s AND rowid < ?%d ORDER BY rowid DESC LIMIT ?%d`, match, n+1, n+2), slot, limit+1)
	} else {
		window, err = seqs(fmt.Sprintf(`%s ORDER BY rowid DESC LIMIT ?%d OFFSET ?%d`, match, n+1, n+2), limit+1, offset)
		if err == nil && len(window) > 0 {
			first := window[0]
			head, err = seqs(fmt.Sprintf(`%s AND rowid > ?%d AND rowid <= ?%d ORDER BY rowid DESC`, match, n+1, n+2), first, slotOf(first)+seqTies-1)
		}
	}
	if err != nil || len(head)+len(window) == 0 {
		return page, err
	}
	var tail []int64
	if len(window) > 0 {
		last := window[len(window)-1]
		if tail, err = seqs(fmt.Sprintf(`%s AND rowid < ?%d AND rowid >= ?%d ORDER BY rowid DESC`, match, n+1, n+2), last, slotOf(last)); err != nil {
			return page, err
		}
	}
	all := slices.Concat(head, window, tail)
	threads, err := s.threadsBySeq(ctx, tx, all)
	if err != nil {
		return page, err
	}
	if len(threads) != len(all) {
		return page, fmt.Errorf("the full-text index and the threads disagree (%d entries, %d threads): the index needs a rebuild", len(all), len(threads))
	}
	slices.SortFunc(threads, compareSearchOrder)
	if c := q.After; c != nil {
		// The head's threads up to the cursor were on earlier pages.
		i, _ := slices.BinarySearchFunc(threads, *c, func(t Thread, c ThreadCursor) int { return compareCursor(t, c) })
		for i < len(threads) && compareCursor(threads[i], *c) <= 0 {
			i++
		}
		threads = threads[i:]
	} else {
		threads = threads[len(head):]
	}
	endPage(&page, threads[:min(len(threads), limit+1)], limit)
	return page, nil
}

// threadsBySeq reads the threads with these seqs, in no particular order.
func (s *sqlStore) threadsBySeq(ctx context.Context, tx *sql.Tx, seqs []int64) ([]Thread, error) {
	list := make([]string, len(seqs))
	for i, seq := range seqs {
		list[i] = strconv.FormatInt(seq, 10)
	}
	// The seqs are integers read from the index, so writing them into
	// the statement is safe, and spares a statement per page size.
	rows, err := tx.QueryContext(ctx, `SELECT `+threadCols+` FROM threads WHERE seq IN (`+strings.Join(list, ",")+`)`)
	if err != nil {
		return nil, err
	}
	return scanThreads(rows)
}

// compareSearchOrder orders threads as searches return them: newest
// first, then by machine and id.
func compareSearchOrder(a, b Thread) int {
	if c := b.UpdatedAt.Compare(a.UpdatedAt); c != 0 {
		return c
	}
	if c := strings.Compare(a.Machine, b.Machine); c != 0 {
		return c
	}
	return strings.Compare(a.ID, b.ID)
}
