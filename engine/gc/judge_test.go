package gc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/uncaged/workflow/engine/cas"
	"github.com/uncaged/workflow/engine/storage"
	"github.com/uncaged/workflow/engine/threads"
)

// twoThreads is a root with an active thread (A, in threads.json) and a
// finished one (F, in history), three steps each, and an orphan blob.
type twoThreads struct {
	l                storage.Layout
	store            *cas.Store
	dir              string
	aStart, aHead    string
	fStart, fHead    string
	orphan, histFile string
}

func newTwoThreads(t *testing.T) twoThreads {
	t.Helper()
	l, store := newRoot(t)
	r := twoThreads{l: l, store: store, dir: l.BundleDir("B")}
	r.aStart, r.aHead = chain(t, store, "active")
	r.fStart, r.fHead = chain(t, store, "finished")
	r.orphan, _ = store.Put("an orphan")
	if err := threads.Upsert(r.dir, "A", threads.Entry{Head: r.aHead, Start: r.aStart, UpdatedAt: 1}); err != nil {
		t.Fatal(err)
	}
	if err := threads.AppendHistory(r.dir, threads.HistoryEntry{ThreadID: "F", Head: r.fHead, Start: r.fStart, CompletedAt: 1}); err != nil {
		t.Fatal(err)
	}
	r.histFile = filepath.Join(threads.HistoryDir(r.dir), "1970-01-01.jsonl")
	return r
}

// editFile replaces old with new in a file, failing when old is not there.
func editFile(t *testing.T, path, old, new string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), old) {
		t.Fatalf("%s does not hold %q", path, old)
	}
	if err := os.WriteFile(path, []byte(strings.Replace(string(b), old, new, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// judgedAlike runs every sweep on a root and checks that they agree with
// doctor: when doctor finds a problem, a collection and a removal of a
// thread the damage is not about both refuse and change nothing; when it
// finds none, the collection runs. It returns whether they refused.
func judgedAlike(t *testing.T, l storage.Layout, store *cas.Store, other string) bool {
	t.Helper()
	before := snapshot(t, l.Root)
	rep, err := Doctor(context.Background(), l, store, DoctorOptions{})
	if err != nil {
		t.Fatal(err)
	}
	checkUnchanged(t, before, snapshot(t, l.Root))
	_, gcErr := Collect(context.Background(), l, store, Options{})
	if rep.Problems() == 0 {
		if gcErr != nil {
			t.Fatalf("doctor passes the root, but the collection says %v", gcErr)
		}
		return false
	}
	if !errors.Is(gcErr, ErrRefused) {
		t.Fatalf("doctor finds %v, but the collection ran: %v", rep.Findings, gcErr)
	}
	checkUnchanged(t, before, snapshot(t, l.Root))
	if !strings.Contains(gcErr.Error(), l.Root) && !strings.Contains(gcErr.Error(), "thread") {
		t.Errorf("the refusal says neither where nor which thread: %v", gcErr)
	}
	if rec, err := threads.Resolve(l, other); err == nil {
		_, err := RemoveThread(context.Background(), l, store, rec, RemoveOptions{})
		if !errors.Is(err, ErrRefused) || !errors.Is(err, ErrNotRemoved) {
			t.Fatalf("removing thread %s past the damage = %v", other, err)
		}
		checkUnchanged(t, before, snapshot(t, l.Root))
	}
	return true
}

// A head or start that does not name a sound node, in any form — cut,
// lengthened, emptied, lower-cased, with a letter outside the alphabet,
// one character changed, of another JSON type, missing — or that names a
// blob that is gone, damaged, or not a file: every sweep refuses, changes
// nothing, and agrees with doctor; the undamaged root is collected.
func TestEveryFormOfABadRootRefusesAlikeEverywhere(t *testing.T) {
	t.Parallel()
	type edit struct {
		name string
		// apply damages the root's line or node for field of the thread
		// in file ("index" or "history") and returns the thread the
		// damage is not about.
		apply func(t *testing.T, r twoThreads, file, field string) (other string)
	}
	// lineEdit changes the field's value; value gets the hash there and
	// the other thread's value of the same field.
	lineEdit := func(name string, value func(h, others string) string) edit {
		return edit{name, func(t *testing.T, r twoThreads, file, field string) string {
			h, path, quoted := r.aHead, threads.IndexFile(r.dir), `"`+field+`": "`
			theirs := r.fHead
			if field == "start" {
				h, theirs = r.aStart, r.fStart
			}
			other := "F"
			if file == "history" {
				h, path, quoted, other, theirs = r.fHead, r.histFile, `"`+field+`":"`, "A", r.aHead
				if field == "start" {
					h, theirs = r.fStart, r.aStart
				}
			}
			editFile(t, path, quoted+h+`"`, strings.TrimSuffix(quoted, `"`)+value(h, theirs))
			return other
		}}
	}
	quote := func(s string) string { return `"` + s + `"` }
	nodeEdit := func(name string, damage func(t *testing.T, blob string)) edit {
		return edit{name, func(t *testing.T, r twoThreads, file, field string) string {
			h, other := r.aHead, "F"
			if file == "history" {
				h, other = r.fHead, "A"
			}
			if field == "start" {
				h = map[string]string{"index": r.aStart, "history": r.fStart}[file]
			}
			damage(t, filepath.Join(r.store.Dir(), h+".txt"))
			return other
		}}
	}
	edits := []edit{
		lineEdit("cut to 12 characters", func(h, _ string) string { return quote(h[:12]) }),
		lineEdit("one character longer", func(h, _ string) string { return quote(h + "0") }),
		lineEdit("empty", func(_, _ string) string { return quote("") }),
		lineEdit("lower case", func(h, _ string) string { return quote(strings.ToLower(h)) }),
		lineEdit("a letter outside the alphabet", func(h, _ string) string { return quote("U" + h[1:]) }),
		lineEdit("one character changed", func(h, _ string) string {
			c := byte('0')
			if h[4] == '0' {
				c = '1'
			}
			return quote(h[:4] + string(c) + h[5:])
		}),
		lineEdit("the other thread's", func(_, theirs string) string { return quote(theirs) }),
		lineEdit("a number", func(_, _ string) string { return "12" }),
		lineEdit("null", func(_, _ string) string { return "null" }),
		lineEdit("an object", func(h, _ string) string { return `{"hash": "` + h + `"}` }),
		nodeEdit("its blob deleted", func(t *testing.T, blob string) {
			if err := os.Remove(blob); err != nil {
				t.Fatal(err)
			}
		}),
		nodeEdit("its blob's bytes changed", func(t *testing.T, blob string) {
			if err := os.WriteFile(blob, []byte("type: content\npayload: not what was hashed\nrefs: []\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}),
		nodeEdit("its blob cut short", func(t *testing.T, blob string) {
			b, _ := os.ReadFile(blob)
			if err := os.WriteFile(blob, b[:len(b)/2], 0o644); err != nil {
				t.Fatal(err)
			}
		}),
		nodeEdit("its blob a link to nothing", func(t *testing.T, blob string) {
			if err := os.Remove(blob); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(blob+".gone", blob); err != nil {
				t.Fatal(err)
			}
		}),
		nodeEdit("its blob a directory", func(t *testing.T, blob string) {
			if err := os.Remove(blob); err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(filepath.Join(blob, "x"), 0o755); err != nil {
				t.Fatal(err)
			}
		}),
		nodeEdit("its blob a FIFO", func(t *testing.T, blob string) {
			if err := os.Remove(blob); err != nil {
				t.Fatal(err)
			}
			if err := syscall.Mkfifo(blob, 0o644); err != nil {
				t.Skip("no FIFOs here:", err)
			}
		}),
	}
	for _, e := range edits {
		for _, file := range []string{"index", "history"} {
			for _, field := range []string{"head", "start"} {
				t.Run(fmt.Sprintf("%s %s %s", file, field, e.name), func(t *testing.T) {
					t.Parallel()
					r := newTwoThreads(t)
					other := e.apply(t, r, file, field)
					if !judgedAlike(t, r.l, r.store, other) {
						t.Fatal("nothing refused the damage")
					}
				})
			}
		}
	}
	t.Run("no damage", func(t *testing.T) {
		t.Parallel()
		r := newTwoThreads(t)
		if judgedAlike(t, r.l, r.store, "F") {
			t.Fatal("an undamaged root was refused")
		}
		if ok, _ := r.store.Exists(r.orphan); ok {
			t.Fatal("the orphan survived")
		}
	})
}

// The reported loss: a bundle directory moved elsewhere and linked back
// was skipped by listings and collections alike, and a collection deleted
// 19 of 21 blobs. A link that leads to the directory is read through, by
// both; one that leads nowhere refuses.
func TestABundleBehindALinkIsReadThroughOrRefused(t *testing.T) {
	t.Parallel()
	r := newTwoThreads(t)
	moved := filepath.Join(t.TempDir(), "B")
	if err := os.Rename(r.dir, moved); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(moved, r.dir); err != nil {
		t.Fatal(err)
	}
	recs, err := threads.List(r.l)
	if err != nil || len(recs) != 2 {
		t.Fatalf("listing through the link = %+v, %v", recs, err)
	}
	res, err := Collect(context.Background(), r.l, r.store, Options{})
	if err != nil || res.DeletedEntries != 1 || res.DeletedHashes[0] != r.orphan {
		t.Fatalf("collection through the link = %+v, %v; want only the orphan deleted", res, err)
	}
	for _, head := range []string{r.aHead, r.fHead} {
		if frames, err := threads.Walk(r.store, head); err != nil || len(frames) != 3 {
			t.Fatalf("the thread ending at %s lost steps: %d, %v", head, len(frames), err)
		}
	}
	if err := os.Rename(moved, moved+".unmounted"); err != nil {
		t.Fatal(err)
	}
	if !judgedAlike(t, r.l, r.store, "") {
		t.Fatal("a bundle behind a link to nothing did not refuse")
	}
}

// A thread's debug log outlives its lines only when they were lost: the
// index or history file deleted, emptied, or its bundle directory gone.
// Every sweep refuses, naming the log; once the log is gone too (as
// `thread rm` leaves it), the thread's nodes are collected.
func TestALostLineIsNoticedByTheThreadsLog(t *testing.T) {
	t.Parallel()
	losses := map[string]func(t *testing.T, r twoThreads){
		"threads.json deleted": func(t *testing.T, r twoThreads) {
			if err := os.Remove(threads.IndexFile(r.dir)); err != nil {
				t.Fatal(err)
			}
		},
		"threads.json emptied to {}": func(t *testing.T, r twoThreads) {
			if err := os.WriteFile(threads.IndexFile(r.dir), []byte("{}\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		},
		"history file deleted": func(t *testing.T, r twoThreads) {
			if err := os.Remove(r.histFile); err != nil {
				t.Fatal(err)
			}
		},
		"history file emptied": func(t *testing.T, r twoThreads) {
			if err := os.WriteFile(r.histFile, nil, 0o644); err != nil {
				t.Fatal(err)
			}
		},
		"bundle directory deleted": func(t *testing.T, r twoThreads) {
			if err := os.RemoveAll(r.dir); err != nil {
				t.Fatal(err)
			}
		},
		"bundle directory replaced by a file": func(t *testing.T, r twoThreads) {
			if err := os.RemoveAll(r.dir); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(r.dir, []byte("{}"), 0o644); err != nil {
				t.Fatal(err)
			}
		},
	}
	for name, lose := range losses {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			r := newTwoThreads(t)
			for _, id := range []string{"A", "F"} {
				if err := os.MkdirAll(r.l.LogsDir("B"), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(r.l.InfoLog("B", id), []byte(`{"tag":"started"}`+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			lose(t, r)
			if !judgedAlike(t, r.l, r.store, "") {
				t.Fatal("a lost line went unnoticed")
			}
			_, err := Collect(context.Background(), r.l, r.store, Options{})
			if !strings.Contains(err.Error(), r.l.InfoLog("B", "A")) && !strings.Contains(err.Error(), r.l.InfoLog("B", "F")) && !strings.Contains(err.Error(), r.dir+": ") {
				t.Fatalf("the refusal names neither the log nor the bundle: %v", err)
			}
		})
	}
	t.Run("the log removed too", func(t *testing.T) {
		t.Parallel()
		r := newTwoThreads(t)
		if err := os.MkdirAll(r.l.LogsDir("B"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(r.l.InfoLog("B", "A"), []byte("{}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		rec, err := threads.Resolve(r.l, "A")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := RemoveThread(context.Background(), r.l, r.store, rec, RemoveOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(r.l.InfoLog("B", "A")); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("the removed thread's log is still there: %v", err)
		}
		if ok, _ := r.store.Exists(r.aHead); ok {
			t.Fatal("the removed thread's head survived its collection")
		}
		if frames, err := threads.Walk(r.store, r.fHead); err != nil || len(frames) != 3 {
			t.Fatalf("the other thread lost steps: %d, %v", len(frames), err)
		}
	})
}

// A node on the way from a root that is gone or damaged stops the sweep:
// what hung below it cannot be known. A damaged node whose refs come from
// a checked line of the refs index is kept, and the sweep runs.
func TestTheWalkRefusesPastANodeItCannotTrust(t *testing.T) {
	t.Parallel()
	middle := func(t *testing.T, r twoThreads) string {
		t.Helper()
		frames, err := threads.Walk(r.store, r.aHead)
		if err != nil || len(frames) != 3 {
			t.Fatal(frames, err)
		}
		return filepath.Join(r.store.Dir(), frames[1].Hash+".txt")
	}
	t.Run("gone", func(t *testing.T) {
		t.Parallel()
		r := newTwoThreads(t)
		if err := os.Remove(middle(t, r)); err != nil {
			t.Fatal(err)
		}
		if !judgedAlike(t, r.l, r.store, "F") {
			t.Fatal("a missing node on the way did not refuse")
		}
	})
	t.Run("damaged, read from its bytes", func(t *testing.T) {
		t.Parallel()
		r := newTwoThreads(t)
		if err := os.Remove(r.store.RefsIndexPath()); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(middle(t, r), []byte("type: content\npayload: changed\nrefs: []\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		before := snapshot(t, r.l.Root)
		if _, err := Collect(context.Background(), r.l, r.store, Options{}); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "does not hash to its name") {
			t.Fatalf("Collect = %v", err)
		}
		checkUnchanged(t, before, snapshot(t, r.l.Root))
	})
	t.Run("damaged, refs from a checked index line", func(t *testing.T) {
		t.Parallel()
		r := newTwoThreads(t)
		p := middle(t, r)
		if err := os.WriteFile(p, []byte("type: content\npayload: changed\nrefs: []\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		res, err := Collect(context.Background(), r.l, r.store, Options{})
		if err != nil || res.DeletedEntries != 1 {
			t.Fatalf("Collect = %+v, %v", res, err)
		}
		if _, err := os.Stat(p); err != nil {
			t.Fatal("the damaged node was collected")
		}
		rest, _ := threads.Walk(r.store, r.fHead)
		if len(rest) != 3 {
			t.Fatal("the other thread lost steps")
		}
	})
}

// A repair that cannot read a line's head sets the line aside and drops
// it; a collection afterwards keeps the thread's whole chain, which hangs
// from the start the kept-aside file still names, until a person deletes
// that file.
func TestARepairThatSetsALineAsideKeepsItsChain(t *testing.T) {
	t.Parallel()
	r := newTwoThreads(t)
	chainOfF := reachableFrom(r.store, r.fHead, r.fStart)
	editFile(t, r.histFile, `"head":"`+r.fHead+`"`, `"head":"`+r.fHead[:12]+`"`)
	rep, err := Doctor(context.Background(), r.l, r.store, DoctorOptions{Repair: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Repaired) != 1 || rep.Repaired[0].File == nil || len(rep.Repaired[0].File.Lost) != 1 {
		t.Fatalf("the repair = %+v; want the line set aside as lost", rep.Repaired)
	}
	res, err := Collect(context.Background(), r.l, r.store, Options{})
	if err != nil || res.DeletedEntries != 1 || res.DeletedHashes[0] != r.orphan {
		t.Fatalf("Collect = %+v, %v; want only the orphan deleted", res, err)
	}
	for h := range chainOfF {
		if ok, _ := r.store.Exists(h); !ok {
			t.Fatalf("node %s of the set-aside thread was collected", h)
		}
	}
	aside, _ := threads.KeptAside(r.dir)
	for _, p := range aside {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	if res, err := Collect(context.Background(), r.l, r.store, Options{}); err != nil || res.DeletedEntries != len(chainOfF) {
		t.Fatalf("Collect once the file is deleted = %+v, %v; want the %d nodes of its chain", res, err, len(chainOfF))
	}
}
