package gc

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/uncaged/workflow/engine/cas"
	"github.com/uncaged/workflow/engine/ids"
	"github.com/uncaged/workflow/engine/storage"
	"github.com/uncaged/workflow/engine/threads"
)

// snapshot reads every file under root, to prove a check changes nothing:
// each regular file's bytes and time, each link's target, each other
// thing's type and mode (a FIFO is never opened).
func snapshot(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrPermission) {
				out[p] = "unreadable"
				return nil
			}
			return err
		}
		st, err := d.Info()
		if err != nil {
			return err
		}
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			out[p] = "-> " + target
		case d.IsDir():
			out[p] = "dir " + st.Mode().String()
		case !d.Type().IsRegular():
			out[p] = st.Mode().String()
		default:
			b, err := os.ReadFile(p)
			if errors.Is(err, fs.ErrPermission) {
				out[p] = "unreadable " + st.Mode().String() + "|" + st.ModTime().String()
				return nil
			}
			if err != nil {
				return err
			}
			out[p] = string(b) + "|" + st.Mode().String() + "|" + st.ModTime().String()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func kinds(r Report) map[FindingKind]int {
	out := map[FindingKind]int{}
	for _, f := range r.Findings {
		if f.Problem {
			out[f.Kind]++
		}
	}
	return out
}

// damagedRoot is a store with one of every kind of damage doctor knows,
// and what it held before the damage.
type damagedRoot struct {
	l                            storage.Layout
	store                        *cas.Store
	indexBefore, historyBefore   string
	activeHead, finishedHead     string
	oldTemp, youngTemp, mismatch string
}

// danglingThread is the thread of damagedRoot whose end node is gone.
const danglingThread = "06EZHZP3N4J2B8V6Q0T9W1X5Y5"

func newDamagedRoot(t *testing.T) damagedRoot {
	t.Helper()
	l := storage.Layout{Root: t.TempDir()}
	store := cas.Open(l.CASDir())
	r := damagedRoot{l: l, store: store}
	dir := l.BundleDir("B")
	aStart, aHead := chain(t, store, "active")
	fStart, fHead := chain(t, store, "finished")
	r.activeHead, r.finishedHead = aHead, fHead
	if err := threads.Upsert(dir, "06EZJ3QM9Q4S5XWA0R1C7D8E2G", threads.Entry{Head: aHead, Start: aStart, UpdatedAt: 1778000100000}); err != nil {
		t.Fatal(err)
	}
	if err := threads.AppendHistory(dir, threads.HistoryEntry{ThreadID: "06EZHZP3N4J2B8V6Q0T9W1X5Y4", Head: fHead, Start: fStart, CompletedAt: 1778000002000}); err != nil {
		t.Fatal(err)
	}
	// A finished thread whose end node is gone: dangling, not repairable.
	if err := threads.AppendHistory(dir, threads.HistoryEntry{ThreadID: danglingThread, Head: "ZZZZZZZZZZZZY", Start: fStart, CompletedAt: 1778000003000}); err != nil {
		t.Fatal(err)
	}

	idx := threads.IndexFile(dir)
	b, _ := os.ReadFile(idx)
	r.indexBefore = string(b)
	if err := os.WriteFile(idx, b[:len(b)-3], 0o644); err != nil {
		t.Fatal(err)
	}
	hist := filepath.Join(threads.HistoryDir(dir), "2026-05-05.jsonl")
	b, _ = os.ReadFile(hist)
	r.historyBefore = string(b)
	if err := os.WriteFile(hist, []byte(strings.Replace(string(b), `"head":"`+fHead, `"head":`+fHead, 1)), 0o644); err != nil {
		t.Fatal(err)
	}

	// The refs index: a torn line, and an entry that lies about the
	// finished thread's head (it "points" only at its start) under a
	// valid check, as only a bug could write it.
	refs := filepath.Join(store.Dir(), "refs.idx")
	f, _ := os.OpenFile(refs, os.O_APPEND|os.O_WRONLY, 0)
	lie := fHead + " 1 " + fStart
	if _, err := f.WriteString(lie + " " + ids.HashBytes([]byte(lie)) + "\n" + "0123456789ABC 01234"); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}

	// Temporary files: one a crash left long ago, one a write in progress.
	r.oldTemp = filepath.Join(dir, "threads.json.tmp.4242.1778000000000")
	r.youngTemp = filepath.Join(store.Dir(), "0123456789ABC.txt.tmp.77")
	if err := os.WriteFile(r.oldTemp, []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(r.youngTemp, []byte("type"), 0o644); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-2 * time.Hour)
	if err := os.Chtimes(r.oldTemp, old, old); err != nil {
		t.Fatal(err)
	}

	// A blob whose bytes changed after it was stored.
	h, _ := store.Put("some orphan text")
	r.mismatch = h
	if err := os.WriteFile(filepath.Join(store.Dir(), h+".txt"), []byte("type: content\npayload: changed\nrefs: []\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return r
}

// Doctor without --repair reports every kind of damage and changes nothing.
func TestDoctorFindsEveryKindOfDamageAndChangesNothing(t *testing.T) {
	t.Parallel()
	r := newDamagedRoot(t)
	before := snapshot(t, r.l.Root)
	var steps []string
	rep, err := Doctor(context.Background(), r.l, r.store, DoctorOptions{Progress: func(step string, done, total int) { steps = append(steps, step) }})
	if err != nil {
		t.Fatal(err)
	}
	got := kinds(rep)
	want := map[FindingKind]int{KindIndex: 1, KindHistory: 1, KindDangling: 1, KindRefsIndex: 2, KindTempFile: 1, KindBlob: 1}
	for k, n := range want {
		if got[k] != n {
			t.Errorf("%s problems = %d, want %d; findings: %+v", k, got[k], n, rep.Findings)
		}
	}
	if rep.Problems() != 7 || rep.Repairable() != 5 {
		t.Errorf("problems %d, repairable %d", rep.Problems(), rep.Repairable())
	}
	for _, f := range rep.Findings {
		if f.Kind == KindIndex && (f.Line != 6 || !strings.HasSuffix(f.Path, "threads.json")) {
			t.Errorf("index finding = %+v", f)
		}
		if f.Kind == KindHistory && f.Line != 1 {
			t.Errorf("history finding = %+v", f)
		}
		if f.Kind == KindTempFile && f.Problem && f.Path != r.oldTemp {
			t.Errorf("a young temporary file is a problem: %+v", f)
		}
	}
	if rep.Checked.Threads != 1 || rep.Checked.Bundles != 1 || rep.Checked.Blobs == 0 || len(steps) == 0 {
		t.Errorf("checked = %+v, %d progress calls", rep.Checked, len(steps))
	}
	if after := snapshot(t, r.l.Root); len(after) != len(before) {
		t.Fatalf("a check changed the store: %d files before, %d after", len(before), len(after))
	} else {
		for p, v := range before {
			if after[p] != v {
				t.Fatalf("a check changed %s", p)
			}
		}
	}
	if _, err := json.Marshal(rep); err != nil {
		t.Fatal(err)
	}
}

// Doctor --repair rebuilds the index and the history line byte for byte from
// what was left and the CAS, keeps the damaged files aside, rebuilds the
// refs index, removes the old temporary file, and leaves what it cannot
// repair reported. A collection afterwards keeps every thread whole.
func TestDoctorRepairRebuildsFromTheCAS(t *testing.T) {
	t.Parallel()
	r := newDamagedRoot(t)
	dir := r.l.BundleDir("B")
	rep, err := Doctor(context.Background(), r.l, r.store, DoctorOptions{Repair: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := kinds(rep); rep.Problems() != 2 || got[KindBlob] != 1 || got[KindDangling] != 1 {
		t.Fatalf("left after repair: %+v", rep.Findings)
	}
	if len(rep.Repaired) != 4 {
		t.Errorf("repaired = %+v", rep.Repaired)
	}
	if b, _ := os.ReadFile(threads.IndexFile(dir)); string(b) != r.indexBefore {
		t.Errorf("rebuilt threads.json =\n%s\nwant\n%s", b, r.indexBefore)
	}
	hist := filepath.Join(threads.HistoryDir(dir), "2026-05-05.jsonl")
	if b, _ := os.ReadFile(hist); string(b) != r.historyBefore {
		t.Errorf("rebuilt history =\n%s\nwant\n%s", b, r.historyBefore)
	}
	aside, _ := threads.KeptAside(dir)
	if len(aside) != 2 {
		t.Fatalf("kept aside: %v", aside)
	}
	for _, p := range aside {
		if b, _ := os.ReadFile(p); len(b) == 0 {
			t.Errorf("kept-aside %s is empty", p)
		}
	}
	if _, err := os.Stat(r.oldTemp); !os.IsNotExist(err) {
		t.Error("the old temporary file is still there")
	}
	if _, err := os.Stat(r.youngTemp); err != nil {
		t.Error("the young temporary file was removed")
	}
	// The thread whose end node is gone still stops a collection, until it
	// is removed as the finding says.
	if _, err := Collect(context.Background(), r.l, r.store, Options{}); !errors.Is(err, ErrRefused) || !strings.Contains(err.Error(), "thread rm "+danglingThread) {
		t.Fatalf("collection with a dangling thread = %v", err)
	}
	rec, err := threads.Resolve(r.l, danglingThread)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := RemoveThread(context.Background(), r.l, r.store, rec, RemoveOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, head := range []string{r.activeHead, r.finishedHead} {
		if frames, err := threads.Walk(r.store, head); err != nil || len(frames) != 3 {
			t.Errorf("thread ending at %s has %d steps after repair and collection: %v", head, len(frames), err)
		}
	}
	// A second repair has nothing left to do; the collection took the
	// damaged orphan blob.
	again, err := Doctor(context.Background(), r.l, r.store, DoctorOptions{Repair: true})
	if err != nil || len(again.Repaired) != 0 || again.Problems() != 0 {
		t.Fatalf("second repair: %+v, %v", again, err)
	}
}

// A threads.json entry cut in the middle of its updatedAt, and a history
// line whose crash-torn end had the next append glued to it, are rebuilt
// from the head nodes in the CAS.
func TestRepairRecoversCutEntriesFromTheChain(t *testing.T) {
	t.Parallel()
	l, store := newRoot(t)
	dir := l.BundleDir("B")
	aStart, aHead := chain(t, store, "active")
	fStart, fHead := chain(t, store, "finished")
	gStart, gHead := chain(t, store, "glued")
	index := `{"T1": {"head": "` + aHead + `", "start": "` + aStart + `", "updatedAt": 17`
	if err := os.MkdirAll(threads.HistoryDir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(threads.IndexFile(dir), []byte(index), 0o644); err != nil {
		t.Fatal(err)
	}
	torn := `{"threadId":"T2","head":"` + fHead + `","start":"` + fStart + `","complet`
	glued := `{"threadId":"T3","head":"` + gHead + `","start":"` + gStart + `","completedAt":9}` + "\n"
	hist := filepath.Join(threads.HistoryDir(dir), "1970-01-01.jsonl")
	if err := os.WriteFile(hist, []byte(torn+glued), 0o644); err != nil {
		t.Fatal(err)
	}

	idxRep, err := threads.RepairIndex(dir, store, time.Now())
	if err != nil || idxRep == nil || idxRep.Recovered != 1 {
		t.Fatalf("RepairIndex = %+v, %v", idxRep, err)
	}
	idx, err := threads.ReadIndex(dir)
	if err != nil || idx["T1"] != (threads.Entry{Head: aHead, Start: aStart, UpdatedAt: 3}) {
		t.Fatalf("index after repair = %v, %v (updatedAt comes from the head's timestamp)", idx, err)
	}
	hReps, err := threads.RepairHistory(dir, store, time.Now())
	if err != nil || len(hReps) != 1 || hReps[0].Recovered != 2 {
		t.Fatalf("RepairHistory = %+v, %v", hReps, err)
	}
	got, err := threads.ReadHistory(dir)
	if err != nil || len(got) != 2 || got[0].ThreadID != "T2" || got[0].CompletedAt != 3 || got[1].ThreadID != "T3" || got[1].CompletedAt != 9 {
		t.Fatalf("history after repair = %+v, %v", got, err)
	}
}
