package gc

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/uncaged/workflow/engine/cas"
	"github.com/uncaged/workflow/engine/node"
	"github.com/uncaged/workflow/engine/storage"
	"github.com/uncaged/workflow/engine/threads"
)

// chain stores a thread of three steps and returns its start and head.
func chain(t *testing.T, store *cas.Store, name string) (start, head string) {
	t.Helper()
	prompt, _ := store.Put("prompt of " + name)
	start, err := store.PutNode(node.NewStart(node.StartPayload{Name: name, Hash: "B"}, prompt))
	if err != nil {
		t.Fatal(err)
	}
	head, anc := "", []string{}
	for i := 0; i < 3; i++ {
		c, _ := store.Put(name + " step " + string(rune('a'+i)))
		p := node.StatePayload{Role: "r", Start: start, Content: c, Ancestors: node.Ancestors(head, anc), Timestamp: int64(i + 1)}
		if head, err = store.PutNode(node.NewState(p)); err != nil {
			t.Fatal(err)
		}
		anc = p.Ancestors
	}
	return start, head
}

func blobCount(t *testing.T, store *cas.Store) int {
	t.Helper()
	all, err := store.List()
	if err != nil {
		t.Fatal(err)
	}
	return len(all)
}

// The reported loss: a threads.json cut by 3 bytes read as empty, and the
// collection deleted the thread's every node. It must refuse instead, name
// the file and line, and delete nothing.
func TestRefusesToSweepPastADamagedIndex(t *testing.T) {
	t.Parallel()
	l, store := newRoot(t)
	start, head := chain(t, store, "active")
	if _, err := store.Put("an orphan"); err != nil {
		t.Fatal(err)
	}
	dir := l.BundleDir("B")
	if err := threads.Upsert(dir, "T", threads.Entry{Head: head, Start: start, UpdatedAt: 1}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(threads.IndexFile(dir))
	if err := os.WriteFile(threads.IndexFile(dir), b[:len(b)-3], 0o644); err != nil {
		t.Fatal(err)
	}
	before := blobCount(t, store)

	res, err := Collect(context.Background(), l, store, Options{})
	if !errors.Is(err, ErrRefused) || !errors.Is(err, threads.ErrDamaged) {
		t.Fatalf("Collect = %+v, %v; want a refusal", res, err)
	}
	if !strings.Contains(err.Error(), threads.IndexFile(dir)+", line 6") {
		t.Fatalf("error does not name the file and line: %v", err)
	}
	if after := blobCount(t, store); after != before || res.DeletedEntries != 0 {
		t.Fatalf("%d of %d blobs left after a refused collection", after, before)
	}
}

// A finished thread whose history line lost a quote must survive too.
func TestRefusesToSweepPastADamagedHistoryLine(t *testing.T) {
	t.Parallel()
	l, store := newRoot(t)
	start, head := chain(t, store, "finished")
	dir := l.BundleDir("B")
	if err := threads.AppendHistory(dir, threads.HistoryEntry{ThreadID: "T", Head: head, Start: start, CompletedAt: 1}); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(threads.HistoryDir(dir), "1970-01-01.jsonl")
	b, _ := os.ReadFile(p)
	if err := os.WriteFile(p, []byte(strings.Replace(string(b), `"head"`, `head"`, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	before := blobCount(t, store)

	_, err := Collect(context.Background(), l, store, Options{})
	if !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), p+", line 1") {
		t.Fatalf("Collect = %v; want a refusal naming %s line 1", err, p)
	}
	if after := blobCount(t, store); after != before {
		t.Fatalf("%d of %d blobs left", after, before)
	}
	if !errors.Is(err, threads.ErrDamaged) {
		t.Fatalf("the refusal does not say a file is damaged: %v", err)
	}
}

// Once a repair has set a damaged file aside, whatever it names stays
// collectable only when nothing else names it: its hashes are roots.
func TestNodesNamedByAKeptAsideFileSurvive(t *testing.T) {
	t.Parallel()
	l := storage.Layout{Root: t.TempDir()}
	store := cas.Open(l.CASDir())
	start, head := chain(t, store, "aside")
	orphan, _ := store.Put("an orphan")
	dir := l.BundleDir("B")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(threads.IndexFile(dir), []byte("{}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	torn := `{"T": {"head": "` + head + `", "start": "` + start
	if err := os.WriteFile(filepath.Join(dir, "threads.json.damaged-20260509T120000Z"), []byte(torn), 0o644); err != nil {
		t.Fatal(err)
	}

	res, err := Collect(context.Background(), l, store, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.DeletedHashes) != 1 || res.DeletedHashes[0] != orphan {
		t.Fatalf("deleted %v, want only the orphan %s", res.DeletedHashes, orphan)
	}
	if frames, err := threads.Walk(store, head); err != nil || len(frames) != 3 {
		t.Fatalf("the kept-aside thread lost steps: %d frames, %v", len(frames), err)
	}
}

func TestHashLikeTokens(t *testing.T) {
	t.Parallel()
	got := HashLikeTokens([]byte(`{"06EZJ3QM9Q4S5XWA0R1C7D8E2G": {"head": "YQDQ3X4EH1VP2,"start":"ab2bp0y50psy6", "updatedAt": 17780001`))
	if strings.Join(got, " ") != "YQDQ3X4EH1VP2 AB2BP0Y50PSY6" {
		t.Fatalf("tokens = %v", got)
	}
}
