package store

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"math/rand"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/pressly/goose/v3"
)

// checkSeqOrder verifies what SQLite's full-text search relies on: every
// thread's seq lies in the slot of its updated_at, so the FTS index's
// rowids run in the search order, and the index holds exactly the
// threads' seqs.
func checkSeqOrder(t *testing.T, db *sql.DB) int {
	t.Helper()
	rows, err := db.Query(`SELECT seq, updated_at FROM threads`)
	if err != nil {
		t.Fatal(err)
	}
	defer closeQuietly(rows)
	n := 0
	for rows.Next() {
		var seq, updated int64
		if err := rows.Scan(&seq, &updated); err != nil {
			t.Fatal(err)
		}
		if want := seqSlot(time.UnixMicro(updated)); slotOf(seq) != want {
			t.Fatalf("thread seq %d updated at %d: slot %d, want %d", seq, updated, slotOf(seq), want)
		}
		n++
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	var indexed int
	if err := db.QueryRow(`SELECT count(*) FROM threads_fts WHERE threads_fts MATCH 'facets : m*'`).Scan(&indexed); err != nil {
		t.Fatal(err)
	}
	var missing int
	if err := db.QueryRow(`SELECT count(*) FROM threads WHERE seq NOT IN (SELECT rowid FROM threads_fts WHERE threads_fts MATCH 'facets : m*')`).Scan(&missing); err != nil {
		t.Fatal(err)
	}
	if indexed != n || missing != 0 {
		t.Fatalf("%d threads, %d index entries, %d threads not in the index", n, indexed, missing)
	}
	return n
}

// TestSeqFollowsUpdatedAt stores threads in an order unrelated to their
// times, moves some in time, and checks that every seq is in its time's
// slot: with the first schema's seqs, numbered as rows arrived, a search
// had to sort every match.
func TestSeqFollowsUpdatedAt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := Open(ctx, Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = st.Close() }() // a test's store
	s := st.(*sqlStore)
	rng := rand.New(rand.NewSource(2))
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	ts := make([]Thread, 300)
	for i := range ts {
		ts[i] = Thread{ID: fmt.Sprint(i), Prompt: "words", UpdatedAt: base.Add(time.Duration(rng.Intn(50)) * time.Millisecond)}
	}
	if err := s.SyncThreads(ctx, "m", ts); err != nil {
		t.Fatal(err)
	}
	for i := range ts {
		if i%3 == 0 {
			ts[i].UpdatedAt = ts[i].UpdatedAt.Add(-time.Hour)
		}
	}
	if err := s.SyncThreads(ctx, "m", ts); err != nil {
		t.Fatal(err)
	}
	if n := checkSeqOrder(t, s.r); n != len(ts) {
		t.Fatalf("%d threads stored, want %d", n, len(ts))
	}
}

// TestSlotFull fills one microsecond's slot: the thread past it is
// refused with a message that says why, and nothing of its batch is kept.
func TestSlotFull(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := Open(ctx, Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = st.Close() }() // a test's store
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	ts := make([]Thread, seqTies+1)
	for i := range ts {
		ts[i] = Thread{ID: fmt.Sprint(i), UpdatedAt: at}
	}
	if err := st.SyncThreads(ctx, "m", ts[:seqTies]); err != nil {
		t.Fatal(err)
	}
	err = st.SyncThreads(ctx, "m", []Thread{{ID: "other", UpdatedAt: at.Add(time.Microsecond)}, ts[seqTies]})
	if err == nil || !strings.Contains(err.Error(), "same microsecond") {
		t.Fatalf("the thread past a full slot: %v, want an error about the same microsecond", err)
	}
	if _, err := st.GetThread(ctx, "m", "other"); err == nil {
		t.Fatal("a refused batch was partly stored")
	}
}

// TestMigrateSearchOrder fills a database at the first schema, whose seqs
// are arrival numbers, and opens it: the migration renumbers the threads
// into the search order and rebuilds the index, and a search with words
// returns what the table's order says.
func TestMigrateSearchOrder(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, SQLiteFile)
	db, err := sql.Open("sqlite", sqliteDSN(path, defaultBusyTimeout, "immediate"))
	if err != nil {
		t.Fatal(err)
	}
	fsys, err := fs.Sub(migrations, "migrations/sqlite")
	if err != nil {
		t.Fatal(err)
	}
	p, err := goose.NewProvider(goose.DialectSQLite3, db, fsys, goose.WithDisableGlobalRegistry(true))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.UpTo(ctx, 1); err != nil {
		t.Fatal(err)
	}
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC).UnixMicro()
	if _, err := db.Exec(`INSERT INTO machines (name, first_seen, last_seen) VALUES ('m1', 0, 0), ('m2', 0, 0)`); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(3))
	for i := range 200 {
		_, err := db.Exec(`INSERT INTO threads (machine, id, prompt, summary, status, updated_at) VALUES (?, ?, ?, 'done', 'completed', ?)`,
			[]string{"m1", "m2"}[rng.Intn(2)], fmt.Sprintf("t%03d", i), []string{"deploy it", "review it"}[i%2], base+int64(rng.Intn(20))*1000)
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	st, err := Open(ctx, Config{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = st.Close() }() // a test's store
	s := st.(*sqlStore)
	if n := checkSeqOrder(t, s.r); n != 200 {
		t.Fatalf("%d threads after the migration, want 200", n)
	}
	page, err := st.SearchThreads(ctx, ThreadQuery{Limit: MaxLimit})
	if err != nil {
		t.Fatal(err)
	}
	text, err := st.SearchThreads(ctx, ThreadQuery{Q: "deploy", Limit: MaxLimit})
	if err != nil || text.Total != 100 {
		t.Fatalf("deploy after the migration: %d matches, %v; want 100", text.Total, err)
	}
	var want []string
	for _, th := range page.Threads {
		if strings.HasPrefix(th.Prompt, "deploy") {
			want = append(want, th.Machine+"/"+th.ID)
		}
	}
	var got []string
	for _, th := range text.Threads {
		got = append(got, th.Machine+"/"+th.ID)
	}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("deploy after the migration:\n got %v\nwant %v", got, want)
	}
}

// TestSyncWritesOneSegment: a sync of threads in no time order adds one
// segment to the FTS index, and one that moves each in time two (the
// deletions, then the new entries). FTS5
// writes a segment whenever a rowid is not above the one before, which
// per-thread triggers did for nearly every thread: a resync cost seconds
// and left searches hundreds of segments to read.
func TestSyncWritesOneSegment(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := Open(ctx, Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = st.Close() }() // a test's store
	s := st.(*sqlStore)
	segments := func() int {
		t.Helper()
		var n int
		if err := s.r.QueryRow(`SELECT count(DISTINCT segid) FROM threads_fts_idx`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	rng := rand.New(rand.NewSource(4))
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	ts := make([]Thread, 300)
	for i := range ts {
		ts[i] = Thread{ID: fmt.Sprint(i), Status: "done", Prompt: "deploy the service", UpdatedAt: base.Add(time.Duration(rng.Intn(100000)) * time.Second)}
	}
	if err := s.SyncThreads(ctx, "m", ts); err != nil {
		t.Fatal(err)
	}
	if n := segments(); n != 1 {
		t.Fatalf("the first sync left %d segments, want 1", n)
	}
	for i := range ts {
		ts[i].UpdatedAt = ts[i].UpdatedAt.Add(time.Duration(rng.Intn(100000)) * time.Second)
	}
	if err := s.SyncThreads(ctx, "m", ts); err != nil {
		t.Fatal(err)
	}
	// Two more at most: the old entries' deletions, then the new entries.
	if n := segments(); n > 3 {
		t.Fatalf("a resync moving every thread left %d segments, want at most 3", n)
	}
	if n := checkSeqOrder(t, s.r); n != len(ts) {
		t.Fatalf("%d threads, want %d", n, len(ts))
	}
}
