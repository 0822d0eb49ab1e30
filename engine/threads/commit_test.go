package threads

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/uncaged/workflow/engine/atomicfile"
	"github.com/uncaged/workflow/shared/testkit"
)

// referenceMarshal is the index layout as encoding/json writes it (what
// marshalIndex wrote before it was written by hand): the bytes
// marshalIndex must match.
func referenceMarshal(idx Index) []byte {
	ids := make([]string, 0, len(idx))
	for id := range idx {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var buf bytes.Buffer
	buf.WriteString("{")
	for i, id := range ids {
		if i > 0 {
			buf.WriteString(",")
		}
		key, _ := json.Marshal(id)
		val, _ := json.MarshalIndent(idx[id], "  ", "  ")
		buf.WriteString("\n  ")
		buf.Write(key)
		buf.WriteString(": ")
		buf.Write(val)
	}
	if len(ids) > 0 {
		buf.WriteString("\n")
	}
	buf.WriteString("}\n")
	return buf.Bytes()
}

// TestMarshalIndexMatchesEncodingJSON over random indexes whose strings
// hold every kind of character JSON treats specially.
func TestMarshalIndexMatchesEncodingJSON(t *testing.T) {
	t.Parallel()
	pieces := []string{"A", "06EZ", "0123456789ABC", `"`, `\`, "<", ">", "&", "\n", "\t", "\x00", "\x1f", "\x7f", "é", "\u2028", "\u2029", "\xff", "\xc3", "😀", " ", "/", "'"}
	rng := rand.New(rand.NewPCG(1, 2))
	str := func() string {
		var b []byte
		for range rng.IntN(5) {
			b = append(b, pieces[rng.IntN(len(pieces))]...)
		}
		return string(b)
	}
	for range 300 {
		idx := Index{}
		for range rng.IntN(6) {
			at := rng.Int64() >> rng.IntN(64)
			if rng.IntN(2) == 0 {
				at = -at
			}
			idx[str()] = Entry{Head: str(), Start: str(), UpdatedAt: at}
		}
		got, err := marshalIndex(idx)
		if err != nil {
			t.Fatal(err)
		}
		if want := referenceMarshal(idx); !bytes.Equal(got, want) {
			t.Fatalf("marshalIndex(%#v) =\n%q\nwant\n%q", idx, got, want)
		}
	}
}

// TestUpsertRefusesWhatWouldReadAsDamage: an entry the readers would not
// read back as written is refused, and the index is left as it was.
func TestUpsertRefusesWhatWouldReadAsDamage(t *testing.T) {
	t.Parallel()
	good := Entry{Head: fake("H"), Start: fake("S"), UpdatedAt: 1}
	cases := []struct {
		name string
		id   string
		e    Entry
	}{
		{"empty id", "", good},
		{"id not UTF-8", "T\xff", good},
		{"head not a hash", "T", Entry{Head: "nothash", Start: fake("S"), UpdatedAt: 1}},
		{"lower-case start", "T", Entry{Head: fake("H"), Start: "s000000000000", UpdatedAt: 1}},
		{"empty head", "T", Entry{Start: fake("S"), UpdatedAt: 1}},
		{"time past 2^53", "T", Entry{Head: fake("H"), Start: fake("S"), UpdatedAt: 1 << 53}},
		{"time below -2^53", "T", Entry{Head: fake("H"), Start: fake("S"), UpdatedAt: -(1 << 53)}},
	}
	for _, c := range cases {
		dir := t.TempDir()
		if err := Upsert(dir, "KEEP", good); err != nil {
			t.Fatal(err)
		}
		before, _ := os.ReadFile(IndexFile(dir))
		called := false
		if err := UpsertWhen(dir, c.id, c.e, func() error { called = true; return nil }); err == nil || called {
			t.Errorf("%s: UpsertWhen = %v (ready called: %v), want a refusal before anything", c.name, err, called)
		}
		if after, _ := os.ReadFile(IndexFile(dir)); !bytes.Equal(before, after) {
			t.Errorf("%s: the refused upsert changed the index to %q", c.name, after)
		}
	}
}

// heldIndex holds the index lock of dir as another process would, until
// release: the writers of this process meanwhile gather in one group.
func heldIndex(t *testing.T, dir string) (release func()) {
	t.Helper()
	l, err := atomicfile.Acquire(IndexFile(dir))
	if err != nil {
		t.Fatal(err)
	}
	return func() {
		if err := l.Release(); err != nil {
			t.Error(err)
		}
	}
}

// waiting reports how many changes wait for a group on dir's index with
// their ready (if any) returned.
func waiting(dir string) int {
	c := committerFor(IndexFile(dir))
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for _, ch := range c.pending {
		if !ch.readying {
			n++
		}
	}
	return n
}

// TestAGroupCommitsInOneRewrite: writers that arrive while the lock is
// held elsewhere are written by one rewrite (one file fsync, one
// directory fsync); a writer whose ready fails, whether its own caller
// ran ready while waiting or the group's leader ran it during the
// rewrite, is left out with its own error, and the others are written.
// Not parallel: the fsync count is the process's.
func TestAGroupCommitsInOneRewrite(t *testing.T) {
	cases := []struct {
		name string
		// fail: which writers' ready fails (0 is the leader, which
		// arrives first and runs its ready during the rewrite).
		fail []int
		// syncs: the fsyncs of the whole group.
		syncs uint64
	}{
		{"all ready", nil, 2},
		{"a waiting writer fails", []int{3}, 2},
		{"the leader fails", []int{0}, 3}, // the rewrite is made again without it
		{"the leader and others fail", []int{0, 2, 5}, 3},
		{"all but one fail", []int{0, 1, 2, 3, 4, 5, 6}, 3},
	}
	const writers = 8
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			old := Index{}
			for i := range writers {
				old[fmt.Sprintf("T%d", i)] = Entry{Head: fake(fmt.Sprintf("PREV%d", i)), Start: fake("S"), UpdatedAt: 1}
			}
			if err := Modify(dir, func(idx Index) (bool, error) {
				for id, e := range old {
					idx[id] = e
				}
				return true, nil
			}); err != nil {
				t.Fatal(err)
			}
			failing := map[int]bool{}
			for _, i := range c.fail {
				failing[i] = true
			}
			release := heldIndex(t, dir)
			before := atomicfile.Syncs()
			errs := make([]error, writers)
			sentinels := make([]error, writers)
			var wg sync.WaitGroup
			start := func(i int) {
				sentinels[i] = fmt.Errorf("node of writer %d not stored", i)
				wg.Go(func() {
					errs[i] = UpsertWhen(dir, fmt.Sprintf("T%d", i), Entry{Head: fake(fmt.Sprintf("NEW%d", i)), Start: fake("S"), UpdatedAt: 2}, func() error {
						if failing[i] {
							return sentinels[i]
						}
						return nil
					})
				})
			}
			start(0)
			testkit.WaitUntil(t, "the leader to take the lead", func() bool {
				c := committerFor(IndexFile(dir))
				c.mu.Lock()
				defer c.mu.Unlock()
				return c.leading
			})
			for i := 1; i < writers; i++ {
				start(i)
			}
			testkit.WaitUntil(t, "every writer to wait for the group", func() bool { return waiting(dir) == writers })
			release()
			wg.Wait()
			want := Index{}
			for i := range writers {
				id := fmt.Sprintf("T%d", i)
				if failing[i] {
					want[id] = old[id]
					if !errors.Is(errs[i], sentinels[i]) {
						t.Errorf("writer %d: %v, want its own ready's error", i, errs[i])
					}
					continue
				}
				want[id] = Entry{Head: fake(fmt.Sprintf("NEW%d", i)), Start: fake("S"), UpdatedAt: 2}
				if errs[i] != nil {
					t.Errorf("writer %d failed with %v", i, errs[i])
				}
			}
			checkIndexFile(t, dir, want)
			if got := atomicfile.Syncs() - before; got != c.syncs {
				t.Errorf("the group made %d fsyncs, want %d", got, c.syncs)
			}
		})
	}
}

// checkIndexFile checks that dir's threads.json holds want, in the
// original's layout byte for byte.
func checkIndexFile(t *testing.T, dir string, want Index) {
	t.Helper()
	got, err := ReadIndex(dir)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("index holds %d entries, want %d:\n got %v\nwant %v", len(got), len(want), got, want)
	}
	b, err := os.ReadFile(IndexFile(dir))
	if err != nil {
		t.Fatal(err)
	}
	if ref := referenceMarshal(want); !bytes.Equal(b, ref) {
		t.Errorf("threads.json is not in the original's layout:\n%q\nwant\n%q", b, ref)
	}
}

// script is the random work of one writer over the ids it alone
// writes: upserts with or without a ready (which may fail), and removes.
// expect is what it leaves in the index.
type script struct {
	name string
	ops  []op
}

type op struct {
	id     string
	remove bool
	head   string
	ready  int // 0: none, 1: succeeds, 2: fails
	spins  int // yields inside ready, so readies overlap rewrites
}

func newScript(name string, seed uint64, ids, n int) script {
	rng := rand.New(rand.NewPCG(seed, 7))
	s := script{name: name}
	for i := range n {
		o := op{id: fmt.Sprintf("%s-%d", name, rng.IntN(ids))}
		if rng.IntN(4) == 0 {
			o.remove = true
		} else {
			o.head = fake(fmt.Sprintf("%X", seed%1000000) + strconv.Itoa(i))
			o.ready = rng.IntN(3)
			if rng.IntN(8) != 0 && o.ready == 2 {
				o.ready = 1 // most readies succeed
			}
			o.spins = rng.IntN(20)
		}
		s.ops = append(s.ops, o)
	}
	return s
}

var errScriptReady = errors.New("a script's ready failed")

// run plays the script through write (Upsert/UpsertWhen/Remove, or
// another writer) and checks each call's own answer.
func (s script) run(dir string, viaModify bool) error {
	state := Index{}
	for i, o := range s.ops {
		switch {
		case o.remove && viaModify:
			if err := Modify(dir, func(idx Index) (bool, error) {
				_, ok := idx[o.id]
				delete(idx, o.id)
				return ok, nil
			}); err != nil {
				return err
			}
			delete(state, o.id)
		case o.remove:
			_, want := state[o.id]
			found, err := Remove(dir, o.id)
			if err != nil {
				return err
			}
			if found != want {
				return fmt.Errorf("%s op %d: Remove(%s) = %v, want %v", s.name, i, o.id, found, want)
			}
			delete(state, o.id)
		default:
			e := Entry{Head: o.head, Start: fake("S"), UpdatedAt: int64(i)}
			var err error
			switch {
			case viaModify:
				err = Modify(dir, func(idx Index) (bool, error) { idx[o.id] = e; return true, nil })
			case o.ready == 0:
				err = Upsert(dir, o.id, e)
			default:
				err = UpsertWhen(dir, o.id, e, func() error {
					for range o.spins {
						runtime.Gosched()
					}
					if o.ready == 2 {
						return errScriptReady
					}
					return nil
				})
			}
			if o.ready == 2 && !viaModify {
				if !errors.Is(err, errScriptReady) {
					return fmt.Errorf("%s op %d: a failing ready gave %v", s.name, i, err)
				}
				continue
			}
			if err != nil {
				return err
			}
			state[o.id] = e
		}
	}
	return nil
}

// expect is the index entries the script leaves.
func (s script) expect(into Index, viaModify bool) {
	for i, o := range s.ops {
		switch {
		case o.remove:
			delete(into, o.id)
		case o.ready == 2 && !viaModify:
		default:
			into[o.id] = Entry{Head: o.head, Start: fake("S"), UpdatedAt: int64(i)}
		}
	}
}

// TestGroupedWritersLoseNoUpdate: random numbers of goroutines upsert
// (with readies that succeed, fail, or take their time) and remove their
// own threads at once, while another writer changes the same index under
// the lock alone (Modify, as the original or a tool would) and another
// process writes through groups of its own. No update is lost, every
// call gets its own answer, and the file ends as the writers left it, in
// the original's layout.
func TestGroupedWritersLoseNoUpdate(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(42, 42))
	for round := range 6 {
		dir := t.TempDir()
		goroutines := 2 + rng.IntN(30)
		ops := 5 + rng.IntN(40)
		var scripts []script
		for g := range goroutines {
			scripts = append(scripts, newScript(fmt.Sprintf("G%d", g), uint64(round*1000+g), 3, ops))
		}
		other := newScript("MOD", uint64(round*1000+999), 4, ops)
		helper := newScript("PROC", uint64(round*1000+998), 4, 2*ops)
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), "THREADS_HELPER_DIR="+dir, "THREADS_HELPER_MODE=script",
			"THREADS_HELPER_SEED="+strconv.Itoa(round*1000+998), "THREADS_HELPER_N="+strconv.Itoa(2*ops))
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		errs := make(chan error, goroutines+1)
		var wg sync.WaitGroup
		for _, s := range scripts {
			wg.Go(func() { errs <- s.run(dir, false) })
		}
		wg.Go(func() { errs <- other.run(dir, true) })
		wg.Wait()
		if err := cmd.Wait(); err != nil {
			t.Fatalf("round %d: the other process: %v", round, err)
		}
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
		}
		want := Index{}
		for _, s := range scripts {
			s.expect(want, false)
		}
		other.expect(want, true)
		helper.expect(want, false)
		checkIndexFile(t, dir, want)
	}
}

// TestIndexNeverNamesAHeadBeforeItsReady: while random writers upsert at
// once, a reader checks every index it reads: each head in it is one
// whose ready returned nil before (its node stored, in the executor), and
// never one whose ready failed.
func TestIndexNeverNamesAHeadBeforeItsReady(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var readied sync.Map // head → true once its ready returned nil
	var stop atomic.Bool
	var seq atomic.Int64
	readerDone := make(chan error, 1)
	go func() {
		checked := 0
		for !stop.Load() || checked == 0 {
			idx, err := ReadIndex(dir)
			if err != nil {
				readerDone <- err
				return
			}
			for id, e := range idx {
				if _, ok := readied.Load(e.Head); !ok {
					readerDone <- fmt.Errorf("the index names %s for %s before its ready returned nil", e.Head, id)
					return
				}
			}
			checked++
		}
		readerDone <- nil
	}()
	rng := rand.New(rand.NewPCG(7, 7))
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 4 + rng.IntN(28) {
		steps, fails := 10+rng.IntN(30), rng.IntN(5)
		wg.Go(func() {
			for i := range steps {
				head := fake(fmt.Sprintf("H%d", seq.Add(1)))
				fail := i%(fails+1) == fails && fails > 0
				err := UpsertWhen(dir, fmt.Sprintf("T%d", g), Entry{Head: head, Start: fake("S"), UpdatedAt: int64(i)}, func() error {
					runtime.Gosched()
					if fail {
						return errScriptReady
					}
					readied.Store(head, true)
					return nil
				})
				if fail != errors.Is(err, errScriptReady) || (!fail && err != nil) {
					errs <- fmt.Errorf("writer %d step %d: %v", g, i, err)
					return
				}
				if !fail {
					// Once the call returns, the index names the head.
					idx, err := ReadIndex(dir)
					if err != nil || idx[fmt.Sprintf("T%d", g)].Head != head {
						errs <- fmt.Errorf("writer %d step %d returned before the index named its head (%v)", g, i, err)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	stop.Store(true)
	if err := <-readerDone; err != nil {
		t.Fatal(err)
	}
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// runScriptAsHelper is the other process of TestGroupedWritersLoseNoUpdate.
func runScriptAsHelper(dir string) error {
	seed, _ := strconv.Atoi(os.Getenv("THREADS_HELPER_SEED"))
	n, _ := strconv.Atoi(os.Getenv("THREADS_HELPER_N"))
	return newScript("PROC", uint64(seed), 4, n).run(dir, false)
}

// TestAWriteAfterAnotherWriterDamagedTheIndexRefuses: what this process
// last wrote (or read) is reused only while the file still holds it byte
// for byte; a file another writer damaged since is refused, as a first
// write would refuse it.
func TestAWriteAfterAnotherWriterDamagedTheIndexRefuses(t *testing.T) {
	t.Parallel()
	e := Entry{Head: fake("H"), Start: fake("S"), UpdatedAt: 1}
	for _, damaged := range []string{"", "\n", `{"T": {"head": `, "not json", "[]", `{"T": {"head": "x", "start": "y", "updatedAt": 1}}`} {
		for _, first := range []string{"a write", "a read that changed nothing"} {
			dir := t.TempDir()
			switch first {
			case "a write":
				if err := Upsert(dir, "T", e); err != nil {
					t.Fatal(err)
				}
			default:
				// A remove of a missing id reads the index without
				// writing it.
				if err := os.WriteFile(IndexFile(dir), []byte("{}\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				if _, err := Remove(dir, "T"); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.WriteFile(IndexFile(dir), []byte(damaged), 0o644); err != nil {
				t.Fatal(err)
			}
			err := Upsert(dir, "U", e)
			var de *DamageError
			if !errors.As(err, &de) {
				t.Errorf("after %s, a write over %q = %v, want a DamageError", first, damaged, err)
			}
			if b, _ := os.ReadFile(IndexFile(dir)); string(b) != damaged {
				t.Errorf("after %s, the damaged index %q was overwritten with %q", first, damaged, b)
			}
		}
	}
}

// TestImageMatchesMarshalIndex: an image kept up to date through random
// sets and removes writes what marshalIndex writes of the same entries.
func TestImageMatchesMarshalIndex(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(9, 9))
	idx := Index{}
	for i := range 50 {
		idx[fmt.Sprintf("06EZ%04d", i)] = Entry{Head: fake("H"), Start: fake("S"), UpdatedAt: int64(i)}
	}
	want := Index{}
	for id, e := range idx {
		want[id] = e
	}
	m := newImage(idx)
	ids := []string{"06EZ0001", "06EZ0049", "a", "z", "<&>", "é", "06EZ", "", "06EZ00010"}
	for i := range 2000 {
		id := ids[rng.IntN(len(ids))]
		if rng.IntN(5) == 0 {
			id = fmt.Sprintf("06EZ%04d", rng.IntN(60))
		}
		if rng.IntN(3) == 0 {
			m.remove(id)
			delete(want, id)
		} else {
			e := Entry{Head: fake(strconv.Itoa(i)), Start: fake("S"), UpdatedAt: rng.Int64N(1 << 53)}
			m.set(id, e)
			want[id] = e
		}
		if i%50 == 0 || i == 1999 {
			if got, ref := m.bytes(), referenceMarshal(want); !bytes.Equal(got, ref) {
				t.Fatalf("after %d changes the image writes\n%q\nwant\n%q", i+1, got, ref)
			}
		}
	}
}

// TestHistoryAppendsOfAGroupShareOneFsync: threads finishing while the
// history lock is held elsewhere are appended together, one write and
// one fsync per day's file (and one directory fsync for the new files),
// after a line a crash cut short; every line is there once. Not
// parallel: the fsync count is the process's.
func TestHistoryAppendsOfAGroupShareOneFsync(t *testing.T) {
	dir := t.TempDir()
	day1 := int64(1778000000000)
	day2 := day1 + 24*3600*1000
	// Yesterday's file exists and ends in a torn line.
	if err := os.MkdirAll(HistoryDir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(HistoryFile(dir, day1), []byte(`{"threadId":"TORN","he`), 0o644); err != nil {
		t.Fatal(err)
	}
	l, err := atomicfile.Acquire(HistoryDir(dir))
	if err != nil {
		t.Fatal(err)
	}
	const n = 12
	before := atomicfile.Syncs()
	var wg sync.WaitGroup
	for i := range n {
		at := day1 + int64(i)
		if i%2 == 1 {
			at = day2 + int64(i)
		}
		wg.Go(func() {
			if err := AppendHistory(dir, HistoryEntry{ThreadID: fmt.Sprintf("T%02d", i), Head: fake("E"), Start: fake("S"), CompletedAt: at}); err != nil {
				t.Error(err)
			}
		})
	}
	w := historyWriterFor(filepath.Clean(HistoryDir(dir)))
	testkit.WaitUntil(t, "every line to wait for the lock", func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return len(w.pending) == n
	})
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	// One group: a fsync for each day's file and one for the directory,
	// which gained day2's.
	if got := atomicfile.Syncs() - before; got != 3 {
		t.Errorf("%d lines in two files took %d fsyncs, want 3", n, got)
	}
	seen := map[string]int{}
	damaged := 0
	if err := EachHistoryTolerant(dir, func(h HistoryEntry) error {
		seen[h.ThreadID]++
		return nil
	}, func(*DamageError) { damaged++ }); err != nil {
		t.Fatal(err)
	}
	if damaged != 1 {
		t.Errorf("%d damaged lines, want the torn one alone", damaged)
	}
	for i := range n {
		if id := fmt.Sprintf("T%02d", i); seen[id] != 1 {
			t.Errorf("thread %s is in the history %d times", id, seen[id])
		}
	}
}

// TestAWriteThatCannotLockFailsAndChangesNothing: when the index lock
// cannot be taken (its directory is a file), every waiting writer gets
// the error; none is told its change was written.
func TestAWriteThatCannotLockFailsAndChangesNothing(t *testing.T) {
	t.Parallel()
	parent := t.TempDir()
	dir := filepath.Join(parent, "bundle")
	if err := os.WriteFile(dir, []byte("a file where the bundle directory belongs"), 0o644); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			err := UpsertWhen(dir, fmt.Sprintf("T%d", i), Entry{Head: fake("H"), Start: fake("S"), UpdatedAt: 1}, func() error { return nil })
			if err == nil {
				t.Errorf("writer %d was told its change was written", i)
			}
		})
	}
	wg.Wait()
}

// TestAHistoryAppendThatCannotLockFails: every thread finishing then is
// told its line was not written.
func TestAHistoryAppendThatCannotLockFails(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "bundle")
	if err := os.WriteFile(dir, []byte("a file where the bundle directory belongs"), 0o644); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			if err := AppendHistory(dir, HistoryEntry{ThreadID: fmt.Sprintf("T%d", i), Head: fake("E"), Start: fake("S"), CompletedAt: 1}); err == nil {
				t.Errorf("thread %d was told its line was written", i)
			}
		})
	}
	wg.Wait()
}
