package gc

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"math/rand"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/uncaged/workflow/engine/canonyaml"
	"github.com/uncaged/workflow/engine/cas"
	"github.com/uncaged/workflow/engine/node"
	"github.com/uncaged/workflow/engine/storage"
	"github.com/uncaged/workflow/engine/threads"
)

func newRoot(t *testing.T) (storage.Layout, *cas.Store) {
	l := storage.Layout{Root: t.TempDir()}
	return l, cas.Open(l.CASDir())
}

// The original's test "keeps CAS entries reachable from threads.json roots".
func TestKeepsReachableFromThreadsJSON(t *testing.T) {
	t.Parallel()
	l, store := newRoot(t)
	prompt, _ := store.Put("prompt")
	start, _ := store.PutNode(node.NewStart(node.StartPayload{Name: "demo", Hash: "B"}, prompt))
	orphan, _ := store.Put("orphan")
	if err := threads.Upsert(l.BundleDir("B"), "T", threads.Entry{Head: start, Start: start, UpdatedAt: 1}); err != nil {
		t.Fatal(err)
	}
	res, err := Collect(context.Background(), l, store, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.ScannedThreads != 2 || res.DeletedEntries != 1 || !reflect.DeepEqual(res.DeletedHashes, []string{orphan}) {
		t.Fatalf("result = %+v", res)
	}
	if res.String() != "scanned 2 threads, 2 active refs, deleted 1 entries" {
		t.Fatalf("line = %q", res.String())
	}
	for _, h := range []string{prompt, start} {
		if ok, _ := store.Exists(h); !ok {
			t.Fatalf("%s collected", h)
		}
	}
}

// The original's "shared CAS prefix survives when one fork thread index
// entry is removed".
func TestForkPrefixSurvives(t *testing.T) {
	t.Parallel()
	l, store := newRoot(t)
	prompt, _ := store.Put("p")
	start, _ := store.PutNode(node.NewStart(node.StartPayload{Name: "demo", Hash: "B"}, prompt))
	c1, _ := store.Put("c1")
	p1 := node.StatePayload{Role: "a", Start: start, Content: c1, Ancestors: []string{}, Timestamp: 1}
	h1, _ := store.PutNode(node.NewState(p1))
	c2, _ := store.Put("c2")
	h2, _ := store.PutNode(node.NewState(node.StatePayload{Role: "b", Start: start, Content: c2, Ancestors: node.Ancestors(h1, p1.Ancestors), Timestamp: 2}))
	empty, _ := store.Put("")
	marker, _ := store.PutNode(node.NewState(node.StatePayload{Role: node.RoleFork, Meta: canonyaml.Map{{Key: "forkFrom", Value: "A"}}, Start: start, Content: empty, Ancestors: []string{h1}, Timestamp: 3}))
	dir := l.BundleDir("B")
	if err := threads.Upsert(dir, "A", threads.Entry{Head: h2, Start: start, UpdatedAt: 2}); err != nil {
		t.Fatal(err)
	}
	if err := threads.Upsert(dir, "F", threads.Entry{Head: marker, Start: start, UpdatedAt: 3}); err != nil {
		t.Fatal(err)
	}
	if _, err := threads.Remove(dir, "A"); err != nil {
		t.Fatal(err)
	}
	if _, err := Collect(context.Background(), l, store, Options{}); err != nil {
		t.Fatal(err)
	}
	for h, want := range map[string]bool{h2: false, c2: false, h1: true, c1: true, start: true, prompt: true, marker: true, empty: true} {
		if ok, _ := store.Exists(h); ok != want {
			t.Errorf("%s exists=%v, want %v", h, ok, want)
		}
	}
}

// A line whose head is not in the CAS, or is no hash at all, stops the
// collection: the thread's other nodes would go with nothing to say what
// they were. Nothing is deleted, and each thread is named.
func TestRefusesPastAMissingOrMalformedRoot(t *testing.T) {
	t.Parallel()
	l, store := newRoot(t)
	kept, _ := store.Put("kept")
	orphan, _ := store.Put("an orphan")
	if err := threads.AppendHistory(l.BundleDir("B"), threads.HistoryEntry{ThreadID: "T", Head: "ZZZZZZZZZZZZY", Start: kept, CompletedAt: 1}); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(l.BundleDir("C"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(threads.IndexFile(l.BundleDir("C")), []byte(`{"U": {"head": "../../etc", "start": "`+kept+`", "updatedAt": 1}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	before := snapshot(t, l.Root)
	res, err := Collect(context.Background(), l, store, Options{})
	if !errors.Is(err, ErrRefused) || !errors.Is(err, threads.ErrDamaged) || res.DeletedEntries != 0 {
		t.Fatalf("Collect = %+v, %v; want a refusal", res, err)
	}
	for _, want := range []string{"thread T names head ZZZZZZZZZZZZY, which is not in the CAS", `thread "U": head "../../etc" is not a node hash`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the refusal does not say %q: %v", want, err)
		}
	}
	if ok, _ := store.Exists(orphan); !ok {
		t.Fatal("a refused collection deleted a blob")
	}
	checkUnchanged(t, before, snapshot(t, l.Root))
}

// checkUnchanged fails when two snapshots of a root differ.
func checkUnchanged(t *testing.T, before, after map[string]string) {
	t.Helper()
	for p, v := range before {
		if a, ok := after[p]; !ok {
			t.Fatalf("%s is gone", p)
		} else if a != v {
			t.Fatalf("%s changed", p)
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			t.Fatalf("%s appeared", p)
		}
	}
}

func TestEmptyRoot(t *testing.T) {
	t.Parallel()
	l, store := newRoot(t)
	res, err := Collect(context.Background(), l, store, Options{})
	if err != nil || res.String() != "scanned 0 threads, 0 active refs, deleted 0 entries" {
		t.Fatalf("%v %v", res, err)
	}
}

// TestNeverDeletesReachable is a property test: random stores of thread
// chains (active, finished, forked, with child threads) and orphans; after a
// collection every blob reachable from a root is still there and every
// unreachable one is gone.
func TestNeverDeletesReachable(t *testing.T) {
	t.Parallel()
	// Modes: the refs index as written; no index at all (a store the
	// original wrote); an index that also lists blobs deleted behind its
	// back.
	for seed := int64(1); seed <= 24; seed++ {
		mode := []string{"index", "no-index", "stale-index"}[seed%3]
		t.Run(fmt.Sprint(seed, mode), func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewSource(seed))
			l, store := newRoot(t)
			var allHeads []string
			reachable := map[string]bool{}
			var mark func(h string)
			mark = func(h string) {
				if reachable[h] {
					return
				}
				b, err := store.Get(h)
				if err != nil {
					return
				}
				reachable[h] = true
				for _, r := range node.RefsOf(b) {
					mark(r)
				}
			}
			nThreads := 1 + rng.Intn(12)
			var roots []string
			for i := 0; i < nThreads; i++ {
				bundle := fmt.Sprintf("B%d", rng.Intn(3))
				prompt, _ := store.Put(fmt.Sprintf("prompt %d %d", seed, rng.Intn(4)))
				parent := ""
				if len(allHeads) > 0 && rng.Intn(3) == 0 {
					parent = allHeads[rng.Intn(len(allHeads))]
				}
				start, _ := store.PutNode(node.NewStart(node.StartPayload{Name: "w", Hash: bundle, ParentState: parent}, prompt))
				head, anc := "", []string{}
				for s := 0; s < rng.Intn(30); s++ {
					c, _ := store.Put(fmt.Sprintf("step %d of %d/%d\nline", s, i, seed))
					child := ""
					if len(allHeads) > 0 && rng.Intn(5) == 0 {
						child = allHeads[rng.Intn(len(allHeads))]
					}
					p := node.StatePayload{Role: "r", Start: start, Content: c, Ancestors: node.Ancestors(head, anc), Timestamp: int64(s), ChildThread: child}
					h, _ := store.PutNode(node.NewState(p))
					head, anc = h, p.Ancestors
					allHeads = append(allHeads, h)
				}
				if head == "" {
					head = start
				}
				id := fmt.Sprintf("T%03d", i)
				switch rng.Intn(3) {
				case 0:
					if err := threads.Upsert(l.BundleDir(bundle), id, threads.Entry{Head: head, Start: start, UpdatedAt: 1}); err != nil {
						t.Fatal(err)
					}
					roots = append(roots, head, start)
				case 1:
					if err := threads.AppendHistory(l.BundleDir(bundle), threads.HistoryEntry{ThreadID: id, Head: head, Start: start, CompletedAt: 1}); err != nil {
						t.Fatal(err)
					}
					roots = append(roots, head, start)
				default: // a thread that was removed: its chain is garbage unless shared
				}
			}
			for o := 0; o < rng.Intn(20); o++ {
				if _, err := store.Put(fmt.Sprintf("orphan %d", o)); err != nil {
					t.Fatal(err)
				}
			}
			switch mode {
			case "no-index":
				if err := os.Remove(filepath.Join(store.Dir(), "refs.idx")); err != nil && !errors.Is(err, fs.ErrNotExist) {
					t.Fatal(err)
				}
			}
			for _, r := range roots {
				mark(r)
			}
			lost := false // a node a thread reaches was deleted behind the index's back
			if mode == "stale-index" && len(allHeads) > 0 {
				gone := allHeads[rng.Intn(len(allHeads))]
				lost = reachable[gone]
				if err := store.Delete(gone); err != nil {
					t.Fatal(err)
				}
				delete(reachable, gone)
			}
			before, _ := store.List()
			_, err := Collect(context.Background(), l, store, Options{})
			if lost {
				// What hung below the lost node is unknown: nothing goes.
				if !errors.Is(err, ErrRefused) {
					t.Fatalf("a collection past a lost node = %v", err)
				}
				if after, _ := store.List(); len(after) != len(before) {
					t.Fatalf("a refused collection deleted %d blobs", len(before)-len(after))
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, h := range before {
				ok, _ := store.Exists(h)
				if reachable[h] && !ok {
					t.Fatalf("reachable blob %s was deleted", h)
				}
				if !reachable[h] && ok {
					t.Fatalf("unreachable blob %s survived", h)
				}
			}
		})
	}
}

func TestProgressAndCancellation(t *testing.T) {
	t.Parallel()
	l, store := newRoot(t)
	if _, err := store.Put("x"); err != nil {
		t.Fatal(err)
	}
	var phases []Phase
	if _, err := Collect(context.Background(), l, store, Options{Progress: func(p Phase, n int) { phases = append(phases, p) }}); err != nil {
		t.Fatal(err)
	}
	if len(phases) == 0 || phases[0] != PhaseRoots || phases[len(phases)-1] != PhaseSweep {
		t.Fatalf("phases = %v", phases)
	}
	if _, err := store.Put("x"); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := threads.Upsert(l.BundleDir("B"), "T", threads.Entry{Head: "SSVQ0RZ55P9Y4", Start: "SSVQ0RZ55P9Y4", UpdatedAt: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := Collect(ctx, l, store, Options{}); err == nil {
		t.Fatal("cancelled collection ran")
	}
	if l2, _ := store.List(); len(l2) == 0 {
		t.Fatal("a cancelled collection swept blobs")
	}
}
