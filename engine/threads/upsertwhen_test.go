package threads

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/uncaged/workflow/engine/atomicfile"
)

// TestUpsertWhenRenamesOnlyAfterReady: while ready runs, readers still see
// the old head; after it, the new one. A ready that fails leaves the index
// as it was, with no temporary file behind.
func TestUpsertWhenRenamesOnlyAfterReady(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	old := Entry{Head: "AAAAAAAAAAAAA", Start: "SSSSSSSSSSSSS", UpdatedAt: 1}
	if err := Upsert(dir, "T", old); err != nil {
		t.Fatal(err)
	}
	next := Entry{Head: "BBBBBBBBBBBBB", Start: "SSSSSSSSSSSSS", UpdatedAt: 2}
	calls := 0
	err := UpsertWhen(dir, "T", next, func() error {
		calls++
		idx, err := ReadIndex(dir)
		if err != nil {
			return err
		}
		if idx["T"] != old {
			t.Errorf("while ready runs the index holds %+v, want the old entry", idx["T"])
		}
		return nil
	})
	if err != nil || calls != 1 {
		t.Fatalf("UpsertWhen = %v after %d calls of ready", err, calls)
	}
	if idx, _ := ReadIndex(dir); idx["T"] != next {
		t.Fatalf("index = %+v, want the new entry", idx["T"])
	}

	failed := errors.New("node not stored")
	err = UpsertWhen(dir, "T", Entry{Head: "CCCCCCCCCCCCC", Start: "SSSSSSSSSSSSS", UpdatedAt: 3}, func() error { return failed })
	if !errors.Is(err, failed) {
		t.Fatalf("UpsertWhen with a failing ready = %v", err)
	}
	if idx, _ := ReadIndex(dir); idx["T"] != next {
		t.Fatalf("a failed ready changed the index to %+v", idx["T"])
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp.") {
			t.Errorf("temporary file %s left behind", e.Name())
		}
	}
}

// TestUpsertWhenRefusesADamagedIndex without calling ready: an index it
// cannot read is never overwritten.
func TestUpsertWhenRefusesADamagedIndex(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(IndexFile(dir), []byte(`{"T": {"head": `), 0o644); err != nil {
		t.Fatal(err)
	}
	called := false
	err := UpsertWhen(dir, "T", Entry{Head: "BBBBBBBBBBBBB", Start: "SSSSSSSSSSSSS", UpdatedAt: 2}, func() error { called = true; return nil })
	var de *DamageError
	if !errors.As(err, &de) || called {
		t.Fatalf("UpsertWhen on a damaged index = %v (ready called: %v)", err, called)
	}
	if b, _ := os.ReadFile(IndexFile(dir)); string(b) != `{"T": {"head": ` {
		t.Fatalf("damaged index rewritten: %q", b)
	}
}

// TestHistorySyncsTheDirectoryOfANewDay: the first completion of a day
// creates its history file, whose name must be on disk before the thread
// leaves threads.json; later ones sync the file only. Not parallel: the
// fsync count is the process's.
func TestHistorySyncsTheDirectoryOfANewDay(t *testing.T) {
	dir := t.TempDir()
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC).UnixMilli()
	before := atomicfile.Syncs()
	if err := AppendHistory(dir, HistoryEntry{ThreadID: "A", Head: "HHHHHHHHHHHHH", Start: "SSSSSSSSSSSSS", CompletedAt: at}); err != nil {
		t.Fatal(err)
	}
	if got := atomicfile.Syncs() - before; got != 2 {
		t.Errorf("first line of a day: %d fsyncs, want 2 (file and directory)", got)
	}
	mark := atomicfile.Syncs()
	if err := AppendHistory(dir, HistoryEntry{ThreadID: "B", Head: "HHHHHHHHHHHHH", Start: "SSSSSSSSSSSSS", CompletedAt: at + 1}); err != nil {
		t.Fatal(err)
	}
	if got := atomicfile.Syncs() - mark; got != 1 {
		t.Errorf("second line of the day: %d fsyncs, want 1", got)
	}
	if _, err := os.Stat(filepath.Dir(HistoryFile(dir, at))); err != nil {
		t.Fatal(err)
	}
}
