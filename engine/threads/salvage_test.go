package threads

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/uncaged/workflow/engine/cas"
	"github.com/uncaged/workflow/engine/node"
)

// storedChain puts a thread of two steps in store and returns its start and
// head; the head's timestamp is 2.
func storedChain(t *testing.T, store *cas.Store) (start, head string) {
	t.Helper()
	prompt, _ := store.Put("prompt")
	start, err := store.PutNode(node.NewStart(node.StartPayload{Name: "demo", Hash: "B"}, prompt))
	if err != nil {
		t.Fatal(err)
	}
	c, _ := store.Put("step")
	p1 := node.StatePayload{Role: "a", Start: start, Content: c, Ancestors: []string{}, Timestamp: 1}
	h1, _ := store.PutNode(node.NewState(p1))
	head, err = store.PutNode(node.NewState(node.StatePayload{Role: "b", Start: start, Content: c, Ancestors: node.Ancestors(h1, nil), Timestamp: 2}))
	if err != nil {
		t.Fatal(err)
	}
	return start, head
}

// Whichever single quote of a threads.json or history line is lost, the
// repair rebuilds the exact bytes both implementations write.
func TestRepairRebuildsEveryLostQuote(t *testing.T) {
	t.Parallel()
	store := cas.Open(filepath.Join(t.TempDir(), "cas"))
	start, head := storedChain(t, store)
	const id = "06EZJ3QM9Q4S5XWA0R1C7D8E2G"
	b, _ := marshalIndex(Index{id: {Head: head, Start: start, UpdatedAt: 1778000100000}})
	index := string(b)
	line := `{"threadId":"` + id + `","head":"` + head + `","start":"` + start + `","completedAt":1778000002000}` + "\n"
	for i := range index {
		if index[i] != '"' {
			continue
		}
		dir := t.TempDir()
		if err := os.WriteFile(IndexFile(dir), []byte(index[:i]+index[i+1:]), 0o644); err != nil {
			t.Fatal(err)
		}
		rep, err := RepairIndex(dir, store, time.Now())
		if got, _ := os.ReadFile(IndexFile(dir)); err != nil || rep == nil || string(got) != index {
			t.Errorf("threads.json without the quote at %d: repaired to\n%s\n(%+v, %v)", i, got, rep, err)
		}
	}
	for i := range line {
		if line[i] != '"' {
			continue
		}
		dir := t.TempDir()
		p := filepath.Join(HistoryDir(dir), "2026-05-05.jsonl")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(line[:i]+line[i+1:]), 0o644); err != nil {
			t.Fatal(err)
		}
		reps, err := RepairHistory(dir, store, time.Now())
		if got, _ := os.ReadFile(p); err != nil || len(reps) != 1 || string(got) != line {
			t.Errorf("history line without the quote at %d: repaired to %q (%v)", i, got, err)
		}
	}
}

// However much of a threads.json's end is cut off, the repair keeps every
// entry whose head survived, taking the rest from the head node.
func TestRepairRebuildsACutIndex(t *testing.T) {
	t.Parallel()
	store := cas.Open(filepath.Join(t.TempDir(), "cas"))
	start, head := storedChain(t, store)
	b, _ := marshalIndex(Index{"T1": {Head: head, Start: start, UpdatedAt: 1778000100000}})
	index := string(b)
	headEnd := strings.Index(index, head) + len(head)
	for cut := 1; len(index)-cut >= headEnd; cut++ {
		dir := t.TempDir()
		if err := os.WriteFile(IndexFile(dir), []byte(index[:len(index)-cut]), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := RepairIndex(dir, store, time.Now()); err != nil {
			t.Fatal(err)
		}
		idx, err := ReadIndex(dir)
		e := idx["T1"]
		if err != nil || e.Head != head || e.Start != start || (e.UpdatedAt != 1778000100000 && e.UpdatedAt != 2) {
			t.Errorf("cut by %d: index = %v, %v", cut, idx, err)
		}
	}
	// An intact index is left alone.
	dir := t.TempDir()
	if err := os.WriteFile(IndexFile(dir), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if rep, err := RepairIndex(dir, store, time.Now()); rep != nil || err != nil {
		t.Fatalf("repair of an intact index = %+v, %v", rep, err)
	}
	if aside, _ := KeptAside(dir); len(aside) != 0 {
		t.Fatalf("an intact index was set aside: %v", aside)
	}
}
